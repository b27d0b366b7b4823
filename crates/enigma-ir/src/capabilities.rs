//! Optional features of the execution model: what a kernel uses that not
//! every device has. Validation records the features a kernel uses in its
//! [`KernelInfo`](crate::KernelInfo); each backend lists the features its
//! device supports in its device info; making a pipeline for a kernel that
//! needs a feature its device lacks is an error naming both.
//!
//! Adding a feature: a variant here with its description, the rule that
//! records it in validation, and each backend's answer for its devices.

use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt;

/// A feature a kernel may need and a device may lack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Feature {
    /// `bfloat` values: MSL 3.1 on Apple GPUs; CUDA compute capability 8.0+.
    Bfloat16,
    /// SIMD-group matrices (`simdgroup_matrix`): every Apple-silicon GPU
    /// (Apple7+); every CUDA GPU enigma runs on (tensor cores on sm_80+).
    SimdgroupMatrix,
    /// `texture2d` parameters (read, write, sample and the size queries):
    /// the simulator and CUDA; not yet Metal, whose runtime does not create
    /// `MTLTexture`s yet.
    Texture2d,
    /// Device-scope fences (`device_fence()`, [`crate::StmtKind::DeviceFence`]):
    /// the simulator and CUDA; Metal from MSL 3.2.
    DeviceFence,
    /// Cooperative tensor operations ([`crate::cooperative`]): the
    /// simulator; Metal (MetalPerformancePrimitives from MSL 4.0,
    /// `simdgroup_matrix` fragments below it); every CUDA GPU (`wgmma` on
    /// sm_90a, a scalar path elsewhere; reductions of SIMD-group-scope
    /// tensors and a cooperative left operand not yet).
    CooperativeTensors,
}

impl Feature {
    pub const ALL: [Feature; 5] = [Feature::Bfloat16, Feature::SimdgroupMatrix, Feature::Texture2d, Feature::DeviceFence, Feature::CooperativeTensors];

    /// What the feature is, in the words of an error message.
    pub fn describe(self) -> &'static str {
        match self {
            Feature::Bfloat16 => "bf16 values",
            Feature::SimdgroupMatrix => "SIMD-group matrices",
            Feature::Texture2d => "2D textures",
            Feature::DeviceFence => "device-scope fences",
            Feature::CooperativeTensors => "cooperative tensor operations (matmul2d)",
        }
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// Every feature: what the simulator, the reference, supports.
pub fn all_features() -> BTreeSet<Feature> {
    Feature::ALL.into_iter().collect()
}

/// The features of `used` that `supported` lacks, in order.
pub fn missing(used: &BTreeSet<Feature>, supported: &BTreeSet<Feature>) -> Vec<Feature> {
    used.difference(supported).copied().collect()
}
