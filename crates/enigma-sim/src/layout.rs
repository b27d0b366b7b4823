//! Where a cooperative tensor's elements live in the registers of its
//! scope's threads ([`Layout`]: layout 0, or a seeded permutation of the
//! slots the sanitizer also runs), and the bits its registers start with
//! ([`unset_bits`]). The `cooperative` module's doc says why the simulator
//! varies them.

use crate::ops;
use enigma_ir::{CooperativeTensor, Scalar};
use std::sync::Arc;

/// Layouts besides layout 0 the sanitizer runs each cooperative tensor in.
pub const SANITIZER_LAYOUTS: u32 = 2;

/// Where each element of a cooperative tensor lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub rows: u32,
    pub cols: u32,
    pub threads: u32,
    pub capacity: u32,
    /// The element (`r·cols + c`) in slot `thread·capacity + slot`, if any.
    pub(crate) slot_elem: Vec<Option<u32>>,
}

impl Layout {
    /// Layout `seed` of `tensor` (the kernel's tensor number `index`, so
    /// that two tensors of one shape get different permutations).
    pub fn new(tensor: &CooperativeTensor, index: u32, seed: u32) -> Layout {
        let (threads, capacity) = (tensor.scope.threads(), tensor.capacity());
        let elements = tensor.rows * tensor.cols;
        let slots = (threads * capacity) as usize;
        let mut order: Vec<u32> = (0..slots as u32).collect();
        if seed > 0 {
            let mut state = (seed as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (index as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03);
            for i in (1..slots).rev() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                order.swap(i, (state % (i as u64 + 1)) as usize);
            }
        }
        let slot_elem = order.into_iter().map(|e| (e < elements).then_some(e)).collect();
        Layout { rows: tensor.rows, cols: tensor.cols, threads, capacity, slot_elem }
    }

    /// The layout of every tensor of a kernel: `seeds[i]` for tensor `i`.
    pub fn all(tensors: &[CooperativeTensor], seeds: &[u32]) -> Vec<Arc<Layout>> {
        tensors.iter().enumerate().map(|(i, t)| Arc::new(Layout::new(t, i as u32, seeds.get(i).copied().unwrap_or(0)))).collect()
    }

    /// The (row, column) of the element in `slot` of scope thread `thread`.
    pub fn at(&self, thread: u32, slot: u32) -> Option<(u32, u32)> {
        self.slot_elem.get((thread * self.capacity + slot) as usize).copied().flatten().map(|e| (e / self.cols, e % self.cols))
    }

    /// A table of `f(element at slot)` for every (thread, slot), indexed
    /// `thread·capacity + slot`.
    pub fn table(&self, f: impl Fn(Option<(u32, u32)>) -> u64) -> Arc<[u64]> {
        (0..self.threads).flat_map(|t| (0..self.capacity).map(move |s| (t, s))).map(|(t, s)| f(self.at(t, s))).collect()
    }
}

/// The bits a cooperative tensor's registers start with: NaN, or all ones
/// for integers, so that a kernel reading a slot before writing it sees
/// it.
pub fn unset_bits(elem: Scalar) -> u64 {
    if elem.is_float() {
        ops::from_f32(elem, f32::NAN)
    } else {
        ops::norm(elem, u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use enigma_ir::ExecutionScope;

    fn tensor(rows: u32, cols: u32, scope: ExecutionScope) -> CooperativeTensor {
        CooperativeTensor { name: "c".into(), elem: Scalar::F32, rows, cols, scope }
    }

    #[test]
    fn every_layout_holds_each_element_once() {
        for (rows, cols, scope) in [(64, 64, ExecutionScope::Simdgroups(4)), (8, 24, ExecutionScope::Simdgroup), (64, 1, ExecutionScope::Simdgroups(2))] {
            let t = tensor(rows, cols, scope);
            let mut previous: Vec<Layout> = vec![];
            for seed in 0..=SANITIZER_LAYOUTS {
                let l = Layout::new(&t, 0, seed);
                let mut seen = vec![0u32; (rows * cols) as usize];
                for th in 0..l.threads {
                    for s in 0..l.capacity {
                        if let Some((r, c)) = l.at(th, s) {
                            seen[(r * cols + c) as usize] += 1;
                        }
                    }
                }
                assert!(seen.iter().all(|&n| n == 1), "{rows}×{cols} seed {seed}");
                assert!(!previous.contains(&l), "{rows}×{cols}: seed {seed} repeats a layout");
                previous.push(l);
            }
        }
        let l = Layout::new(&tensor(64, 64, ExecutionScope::Simdgroups(4)), 0, 0);
        assert_eq!((l.at(0, 0), l.at(0, 31), l.at(1, 0), l.at(127, 31)), (Some((0, 0)), Some((0, 31)), Some((0, 32)), Some((63, 63))));
    }
}
