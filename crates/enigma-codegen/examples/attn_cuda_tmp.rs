use enigma_ir::{validate, ValidationOptions};
use enigma_kernels::library::attention_prefill_cooperative::*;
use enigma_kernels::library::DType;
fn main() {
    let cfg = CoopPrefillConfig { dtype: DType::F16, d: 128, causal: true, lse: false, block_q: 64, block_kv: 64 };
    let k = prefill_cooperative(&cfg);
    let info = validate(&k, &ValidationOptions { max_threadgroup_memory_bytes: 1 << 20, ..Default::default() }).unwrap();
    let o = enigma_codegen::cuda::Options::for_arch("sm_90a").unwrap();
    println!("{}", enigma_codegen::cuda::write_string(&k, &info, &o).unwrap().source);
}
