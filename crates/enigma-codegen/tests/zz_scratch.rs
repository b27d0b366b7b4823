use enigma_kernels::library::qgemm_cooperative::*;
use enigma_kernels::library::{DType, quant::Format, split::SplitSum};
#[test]
fn dump() {
    let cfg = CoopQgemmConfig { format: Format::Int4, output: DType::F16, tm: 64, tn: 64, tk: 128, stages: 4, raster: 8, splits: 3, split_sum: SplitSum::Reduction, whole: false, tile_copies: true };
    let k = qgemm_cooperative(&cfg);
    let info = enigma_ir::validate(&k, &enigma_ir::ValidationOptions { max_threadgroup_memory_bytes: 1 << 20, ..Default::default() }).unwrap();
    let src = enigma_codegen::cuda::write_string(&k, &info, &enigma_codegen::cuda::Options::for_arch("sm_90a").unwrap()).unwrap();
    std::fs::write("/tmp/q.cu", src.source).unwrap();
}
