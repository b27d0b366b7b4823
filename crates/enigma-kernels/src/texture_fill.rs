//! The kernel of seed 003 ("Calculating Threadgroup and Grid Sizes"): Listing
//! 4 writes opaque white to every pixel of a texture, returning where the
//! thread lies outside it, with the dispatches the seed computes for it
//! (Listings 1–3) and the texture it leaves.

use enigma_ir::builder::*;
use enigma_ir::{Access, AtomicOp, Kernel, Scalar, TextureAccess, Type};

/// Listing 4, `simpleKernelFunction`:
///
/// ```text
/// if (position.x >= outputTexture.get_width() || position.y >= outputTexture.get_height()) return;
/// outputTexture.write(float4(1.0), position);
/// ```
pub fn simple_kernel_function() -> Kernel {
    fill_white(true, false)
}

/// Listing 4 with its bounds check (`bounds_check`) or without it (for a
/// dispatch by threads whose grid is exactly the texture), and with
/// `count_writes` a u32 buffer `counts` after the texture, where each
/// thread adds 1 at its texel's row-major index — so a test can see every
/// texel written exactly once.
pub fn fill_white(bounds_check: bool, count_writes: bool) -> Kernel {
    let mut k = KernelBuilder::new(if count_writes { "simpleKernelFunction_counted" } else { "simpleKernelFunction" });
    let out = k.texture2d("outputTexture", Scalar::F32, TextureAccess::Write);
    let counts = count_writes.then(|| k.buffer("counts", Type::U32, Access::ReadWrite));
    let gid = k.let_("gid", thread_position_in_grid());
    let position = k.let_("position", vector(Type::vector(Scalar::U32, 2), &[gid.x(), gid.y()]));
    if bounds_check {
        k.if_(position.x().ge(out.get_width()).or(position.y().ge(out.get_height())), |k| k.return_());
    }
    k.texture_write(out, vector(Type::vector(Scalar::F32, 4), &[lit(Scalar::F32, 1.0)]), position);
    if let Some(counts) = counts {
        k.atomic(AtomicOp::Add, counts.at(gid.y() * out.get_width() + gid.x()), 1u32);
    }
    k.finish().expect("the seed kernel uses only expressions of its own builder")
}

/// The threadgroup Listing 1 computes on a GPU whose thread execution width
/// is 32 and whose pipeline allows 512 threads: 32 × 16.
pub const THREADS_PER_THREADGROUP: [u32; 3] = [32, 16, 1];

/// Listing 3's `dispatchThreadgroups` grid for a `width`×`height` texture:
/// enough whole threadgroups to cover it, rounded up (the kernel's bounds
/// check drops the threads past the edge).
pub fn threadgroups(width: u32, height: u32) -> [u32; 3] {
    let [w, h, _] = THREADS_PER_THREADGROUP;
    [width.div_ceil(w), height.div_ceil(h), 1]
}

/// What Listing 4 leaves in an rgba8unorm texture: every channel of every
/// texel 255 (opaque white).
pub fn reference_rgba8(width: u32, height: u32) -> Vec<u8> {
    vec![255; width as usize * height as usize * 4]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's numbers: 1024×768 is 32×48 threadgroups with no thread to
    /// spare; 1920×1080 rounds up to 60×68.
    #[test]
    fn threadgroups_are_the_seeds() {
        assert_eq!(threadgroups(1024, 768), [32, 48, 1]);
        assert_eq!(threadgroups(1920, 1080), [60, 68, 1]);
    }
}
