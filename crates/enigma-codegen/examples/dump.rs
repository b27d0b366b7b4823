use enigma_ir::{validate, ValidationOptions};
fn main() {
    let mut kernels = enigma_kernels::dispatch_patterns::all();
    kernels.push(enigma_kernels::two_pass_sum::reduce_threadgroup());
    kernels.push(enigma_kernels::two_pass_sum::reduce_final());
    let which = std::env::args().nth(1).unwrap_or_default();
    for k in kernels {
        if !which.is_empty() && k.name != which { continue; }
        let info = validate(&k, &ValidationOptions::default()).unwrap();
        if std::env::var("CUDA").is_ok() { println!("{}", enigma_codegen::cuda::write_string(&k, &info, &Default::default()).unwrap().source); } else { println!("{}", enigma_codegen::msl::write_string(&k, &info, &Default::default()).unwrap()); }
    }
}
