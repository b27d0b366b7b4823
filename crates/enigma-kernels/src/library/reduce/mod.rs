//! Reductions: sum, max and min of a vector of any length, and of each row
//! of a `[rows, d]` matrix. Results are f32; accumulation is f32 per
//! thread, then SIMD-group and threadgroup reductions.
//!
//! **Vector** ([`reduce()`], two passes like seed 001 but for any length):
//! pass 1 runs `G` threadgroups that stride over the whole vector (grid-stride
//! loop, `unroll` independent loads in flight per thread, `float4` loads
//! through the `x4` view with the tail of `n % 4` elements read through the
//! scalar view `x` by the first threadgroup) and writes one partial per
//! threadgroup; pass 2 is the same kernel over the `G` f32 partials in one
//! threadgroup. When `G = 1` pass 1 writes the result directly.
//! Parameters: `[x4,] x, out, n`.
//!
//! **Rows** ([`reduce_rows`]): one threadgroup per row, threads striding
//! over the row (`float4` loads when `d % 4 == 0`); parameters
//! `x (or x4), out, d`. Threadgroup size from seed 004's row-reduction rows.
//!
//! **Axis** ([`reduce_axis`]): the array seen as `[outer, axis, inner]`,
//! reduced over its middle dimension: one thread per `(outer, inner)`
//! column, which walks the axis serially with a stride of `inner` elements
//! (consecutive threads read consecutive elements of a row of `inner`).
//! Besides sum, max and min it gives the index of the first maximum or
//! minimum (`argmax`, `argmin`, as i32; a NaN counts as the largest and
//! as the smallest value, as in PyTorch). Parameters: `x, out, axis,
//! inner, columns` (`columns = outer · inner`, the threads that work).
//! [`AxisPlan`] and `axis_columns` are shared by the other kernels over
//! an axis (softmax, cumulative sums and products).
//!
//! **Axis by blocks of columns** ([`reduce_axis_blocks`], chosen by
//! [`axis_by_blocks`] when a row of `inner` fills a SIMD group or the
//! columns are fewer than 65536): a threadgroup takes 32 consecutive
//! vectors of `inner` (128 columns with `float4`/`half4` loads, 32
//! without), its lanes reading consecutive vectors of a row (coalesced),
//! its SIMD groups walking different rows of the axis; the groups' partials
//! meet in threadgroup memory and one thread per column combines them
//! (for argmax/argmin keeping the extreme of the lowest index). When the
//! blocks are too few to fill the GPU ([`plan_axis_blocks`]: fewer than
//! 2^19 threads) the axis is split over threadgroups, each writing a
//! partial of `[outer, splits, inner]` (an index search also the extreme's
//! f32 value), and a second pass of the same kernel, over f32, reduces the
//! splits. Parameters: `x[4], [xi[4],] out | out_index, out_value, axis,
//! units, col_blocks, splits, chunk`.
//!
//! **Argmax and argmin of rows** ([`arg_rows`]): over the last axis
//! (`inner = 1`) the index search runs as the row reductions do, one
//! threadgroup of `T` threads (a power of two) per row, each thread keeping
//! the first extreme of its strided elements, then a tree over threadgroup
//! memory that keeps the extreme of the lowest index (a NaN the extreme,
//! the first NaN of the row). Parameters: `x, out, d`.
//!
//! **Pooling** ([`pool2d`]): the maximum or mean of each `kh × kw` window
//! of each `h × w` plane (NCHW), windows `sh`, `sw` apart, the planes
//! padded by `ph`, `pw` (padding never wins a maximum; a mean divides by
//! the whole window, or with `count_pad` false by its elements inside the
//! plane). One thread per output element. Parameters: `x, y, h, w, oh,
//! ow, kh, kw, sh, sw, ph, pw, total`, the sizes by value.

mod axis;
mod axis_blocks;
mod pool;
mod rows;
mod vector;

pub(crate) use axis::axis_columns;
pub use axis::{plan_axis, reduce_axis, AxisArgs, AxisPlan, AxisReduceArgs, AxisReduction, AxisRowArgs};
pub use axis_blocks::{axis_by_blocks, plan_axis_blocks, reduce_axis_blocks, AxisBlocks, AxisBlocksArgs, AxisBlocksDims, AxisBlocksPass, AxisBlocksPlan};
pub use pool::{pool2d, Pool, PoolArgs, PoolDims};
pub use rows::{arg_rows, plan_arg_rows, plan_rows, reduce_rows, reference_rows, ArgRowsPlan, RowReduceArgs, RowsPlan};
pub use vector::{plan, reduce, reference, ReduceArgs, ReduceOptions, ReducePass, ReducePlan, DEFAULT_MAX_GROUPS, DEFAULT_UNROLL};
