//! The devices the selection tables and the variant dump choose for: a
//! kind, a multiprocessor count, a threadgroup-memory limit and whether it
//! has device-scope fences (no `wgmma`; a test sets it where it asks).

use enigma_backend::{DeviceInfo, DeviceKind, ReadWriteTier};
use enigma_ir::Feature;

pub fn device(kind: DeviceKind, compute_units: u32, memory: u64, fences: bool) -> DeviceInfo {
    DeviceInfo {
        kind,
        name: format!("{kind:?}"),
        max_threads_per_threadgroup: 1024,
        max_threadgroup_memory_bytes: memory,
        simd_width: 32,
        compute_units,
        memory_bytes: None,
        features: if fences { [Feature::DeviceFence].into_iter().collect() } else { Default::default() },
        cooperative_lowering: None,
        read_write_textures: ReadWriteTier::Tier2,
    }
}
