//! Where a thread runs: the lanes of a SIMD group ([`LANES`], a value per
//! lane: [`Lanes`]) and a threadgroup's place in the grid ([`TgPlace`]).

/// Lanes per SIMD group, as an array length.
pub const LANES: usize = enigma_ir::limits::SIMD_WIDTH as usize;
pub type Lanes = [u64; LANES];

/// Where a threadgroup sits and how large it actually is.
#[derive(Clone, Copy, Debug)]
pub struct TgPlace {
    pub position: [u32; 3],
    pub size: [u32; 3],
}

impl TgPlace {
    pub fn threads(&self) -> u32 {
        self.size[0] * self.size[1] * self.size[2]
    }

    /// Position in the threadgroup of linear thread index `linear`.
    pub fn local_position(&self, linear: u32) -> [u32; 3] {
        let [sx, sy, _] = self.size;
        [linear % sx, (linear / sx) % sy, linear / (sx * sy)]
    }

    pub fn grid_position(&self, linear: u32, full: [u32; 3]) -> [u32; 3] {
        let l = self.local_position(linear);
        [0, 1, 2].map(|a| self.position[a] * full[a] + l[a])
    }
}
