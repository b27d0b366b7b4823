//! The arguments the library's matrix products declare
//! ([`crate::kernel_args!`]): the operands and shape every one has
//! ([`MatrixArgs`]), beside those of a product of values ([`PlainArgs`]) or
//! of packed 4-bit weights ([`PackedArgs`]).

crate::kernel_args! {
    /// The operands and shape the library's matrix products declare (each
    /// kernel its own subset: the fused and fragment kernels read A through
    /// `a4` only), bound beside [`PlainArgs`] or [`PackedArgs`] and
    /// `split::SplitArgs` (C).
    pub struct MatrixArgs {
        A a: buffer,
        /// A's 4-element vector view.
        A4 a4: buffer,
        B b: buffer,
        M m: u32,
        N n: u32,
        K k: u32,
    }
}

crate::kernel_args! {
    /// A product of B's values (this GEMM, the SIMT and the cooperative
    /// kernels): B's vector view, `C = alpha·A·B + beta·C`'s scalars, the
    /// elements of A from one product of the batch to the next (`m·k` for
    /// consecutive matrices, 0 for one A every product shares), the
    /// number of products in the batch (which the persistent
    /// cooperative kernel reads; the others take it from the grid) and,
    /// for a kernel with a row bias ([`super::CoopGemmConfig::row_bias`],
    /// `SgemmConfig::row_bias`), the `m` values of the inputs' type added
    /// to C's rows.
    pub struct PlainArgs {
        B4 b4: buffer,
        ALPHA alpha: f32,
        BETA beta: f32,
        A_STRIDE a_stride: u32,
        BATCH batch: u32,
        BIAS bias: optional,
    }
}

crate::kernel_args! {
    /// A product of packed 4-bit B words (`gemm::qgemm`, `qgemm_fused`,
    /// `qmatmul_fragments`, `qgemm_cooperative`): the f16 scale per `group`
    /// K values and, for MLX's affine weights (which only
    /// `qgemm_cooperative` of these reads), the f16 bias beside each scale.
    pub struct PackedArgs {
        SCALES scales: buffer,
        GROUP group: u32,
        BIASES biases: optional,
    }
}
