// A virtualised list of rows of varying height: only the rows in view (plus a margin) exist in
// the DOM. Rows are measured once rendered (and again when they resize); unmeasured rows count
// as the average measured height. When heights change above the view, the scroll position is
// corrected so that the row at the top of the view stays where it is.

export class VirtualList {
  /**
   * @param {object} options
   * @param {HTMLElement} options.scroller  the scrolling element (overflow: auto)
   * @param {number} options.count          number of rows
   * @param {(index: number) => {el: HTMLElement, measured: boolean}} options.renderRow
   *   builds a row; `measured: false` for a placeholder whose height must not be learnt
   * @param {number} [options.estimate]     height of a row never measured (px)
   * @param {number} [options.overscan]     margin rendered above and below the view (px)
   * @param {(first: number, last: number) => void} [options.onRange]  rows now rendered
   */
  constructor({ scroller, count, renderRow, estimate = 160, overscan = 800, onRange }) {
    this.scroller = scroller;
    this.renderRow = renderRow;
    this.estimateDefault = estimate;
    this.overscan = overscan;
    this.onRange = onRange || (() => {});
    this.canvas = document.createElement("div");
    this.canvas.className = "vlist-canvas";
    scroller.append(this.canvas);
    this.rows = new Map(); // index -> {el, measured}
    this.pinned = new Set();
    this.measuredSum = 0;
    this.measuredCount = 0;
    this.setCount(count);
    this.frame = 0;
    this.onScroll = () => this.schedule();
    scroller.addEventListener("scroll", this.onScroll, { passive: true });
    this.resizeObserver = new ResizeObserver(() => this.schedule());
    this.resizeObserver.observe(scroller);
    this.rowObserver = new ResizeObserver((entries) => {
      if (entries.some((entry) => entry.target.isConnected)) this.schedule();
    });
  }

  /** The number of rows changed (rows keep their measured heights). */
  setCount(count) {
    const old = this.heights;
    this.count = count;
    this.heights = new Float64Array(count).fill(-1);
    if (old) this.heights.set(old.subarray(0, Math.min(old.length, count)));
    this.recountAverage();
    this.dirty = true;
    for (const index of [...this.rows.keys()]) if (index >= count) this.removeRow(index);
  }

  recountAverage() {
    this.measuredSum = 0;
    this.measuredCount = 0;
    for (const height of this.heights) {
      if (height >= 0) {
        this.measuredSum += height;
        this.measuredCount++;
      }
    }
  }

  get estimate() {
    return this.measuredCount ? this.measuredSum / this.measuredCount : this.estimateDefault;
  }

  heightOf(index) {
    const height = this.heights[index];
    return height >= 0 ? height : this.estimate;
  }

  /** offsets[i] is row i's top; offsets[count] the total height. O(n), only when dirty. */
  layout() {
    if (!this.dirty) return;
    const n = this.count;
    if (!this.offsets || this.offsets.length !== n + 1) this.offsets = new Float64Array(n + 1);
    const estimate = this.estimate;
    let y = 0;
    for (let i = 0; i < n; i++) {
      this.offsets[i] = y;
      const height = this.heights[i];
      y += height >= 0 ? height : estimate;
    }
    this.offsets[n] = y;
    this.canvas.style.height = `${Math.ceil(y)}px`;
    this.dirty = false;
  }

  /** The row at vertical position `y` (binary search over the offsets). */
  indexAt(y) {
    this.layout();
    let lo = 0;
    let hi = this.count - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.offsets[mid] <= y) lo = mid;
      else hi = mid - 1;
    }
    return Math.max(0, lo);
  }

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  /** Render the rows in view, measure them, and repeat while measuring moved things. */
  render() {
    if (this.destroyed) return;
    for (let pass = 0; pass < 4; pass++) {
      if (!this.renderPass()) break;
    }
    if (this.count) this.onRange(this.first, this.last);
  }

  renderPass() {
    this.layout();
    const top = this.scroller.scrollTop;
    const viewport = this.scroller.clientHeight || 600;
    const wanted = new Set(this.pinned);
    let first = 0;
    let last = -1;
    if (this.count) {
      first = this.indexAt(Math.max(0, top - this.overscan));
      last = first;
      const bottom = top + viewport + this.overscan;
      while (last + 1 < this.count && this.offsets[last + 1] < bottom) last++;
      for (let i = first; i <= last; i++) wanted.add(i);
    }
    this.first = first;
    this.last = last;
    const focused = document.activeElement;
    for (const [index, row] of this.rows) {
      if (!wanted.has(index) && !row.el.contains(focused)) this.removeRow(index);
    }
    for (const index of wanted) {
      if (index < this.count && !this.rows.has(index)) this.addRow(index);
    }
    // Measure every row (reads), then decide (no writes in between: one layout).
    const anchor = this.count ? this.indexAt(top) : 0;
    const anchorShift = this.count ? top - this.offsets[anchor] : 0;
    let changed = false;
    for (const [index, row] of this.rows) {
      if (!row.measured) continue;
      const height = row.el.offsetHeight;
      if (height > 0 && Math.abs(height - this.heights[index]) > 0.5) {
        if (this.heights[index] >= 0) {
          this.measuredSum -= this.heights[index];
        } else {
          this.measuredCount++;
        }
        this.measuredSum += height;
        this.heights[index] = height;
        changed = true;
      }
    }
    if (changed) {
      this.dirty = true;
      this.layout();
      if (this.stickTo !== undefined) {
        this.applyStick();
      } else if (this.count) {
        const wantedTop = this.offsets[anchor] + anchorShift;
        if (Math.abs(wantedTop - this.scroller.scrollTop) > 0.5) this.scroller.scrollTop = wantedTop;
      }
    }
    for (const [index, row] of this.rows) {
      row.el.style.transform = `translateY(${this.offsets[index]}px)`;
    }
    return changed;
  }

  addRow(index) {
    const row = this.renderRow(index);
    row.el.classList.add("vlist-row");
    row.el.dataset.index = String(index);
    if (!row.measured) row.el.style.height = `${this.heightOf(index)}px`;
    // Keep the DOM in message order (screen readers and Tab follow the DOM, not the layout).
    let next = null;
    for (const [other, rendered] of this.rows) {
      if (other > index && (next === null || other < next.index)) next = { index: other, el: rendered.el };
    }
    this.rows.set(index, row);
    this.canvas.insertBefore(row.el, next ? next.el : null);
    if (row.measured) this.rowObserver.observe(row.el);
  }

  removeRow(index) {
    const row = this.rows.get(index);
    if (!row) return;
    this.rowObserver.unobserve(row.el);
    row.el.remove();
    this.rows.delete(index);
  }

  /** Build row `index` again (its data changed), keeping focus inside it if it had it. */
  refreshRow(index) {
    const old = this.rows.get(index);
    if (!old) return;
    const hadFocus = old.el.contains(document.activeElement);
    const row = this.renderRow(index);
    row.el.classList.add("vlist-row");
    row.el.dataset.index = String(index);
    if (!row.measured) row.el.style.height = `${this.heightOf(index)}px`;
    row.el.style.transform = old.el.style.transform;
    this.rowObserver.unobserve(old.el);
    old.el.replaceWith(row.el);
    this.rows.set(index, row);
    if (row.measured) this.rowObserver.observe(row.el);
    if (hadFocus) row.el.focus({ preventScroll: true });
    this.schedule();
  }

  /** Rebuild every rendered row. */
  refreshAll() {
    for (const index of [...this.rows.keys()]) this.refreshRow(index);
  }

  rowElement(index) {
    const row = this.rows.get(index);
    return row ? row.el : null;
  }

  /** Keep these rows rendered even when out of view (the active row, the one being edited). */
  pin(...indexes) {
    this.pinned.clear();
    for (const index of indexes) {
      if (index !== null && index !== undefined && index >= 0) this.pinned.add(index);
    }
  }

  /**
   * Bring row `index` into view: "start" puts it at the top, "end" at the bottom, "nearest"
   * scrolls only when it is not wholly visible. Heights learnt on the way are taken into
   * account (a few passes).
   */
  scrollToIndex(index, align = "start") {
    if (!this.count) return;
    index = Math.max(0, Math.min(this.count - 1, index));
    this.stickTo = { index, align };
    try {
      for (let pass = 0; pass < 4; pass++) {
        this.layout();
        if (!this.applyStick()) break;
        this.render();
      }
      this.render();
    } finally {
      this.stickTo = undefined;
    }
  }

  applyStick() {
    const { index, align } = this.stickTo;
    const top = this.offsets[index];
    const bottom = this.offsets[index + 1];
    const viewport = this.scroller.clientHeight;
    const current = this.scroller.scrollTop;
    let target = current;
    if (align === "start") target = top;
    else if (align === "end") target = bottom - viewport;
    else if (top < current) target = top;
    else if (bottom > current + viewport) target = Math.min(top, bottom - viewport);
    const max = Math.max(0, this.offsets[this.count] - viewport);
    target = Math.max(0, Math.min(max, target));
    if (Math.abs(target - current) <= 0.5) return false;
    this.scroller.scrollTop = target;
    return true;
  }

  destroy() {
    this.destroyed = true;
    cancelAnimationFrame(this.frame);
    this.scroller.removeEventListener("scroll", this.onScroll);
    this.resizeObserver.disconnect();
    this.rowObserver.disconnect();
    this.canvas.remove();
    this.rows.clear();
  }
}
