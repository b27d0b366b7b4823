//! Every kernel of the library and the seeds passes validation.

use enigma_ir::{validate, ValidationOptions};

#[test]
fn seed_and_reduce_kernels_validate() {
    let mut kernels = enigma_kernels::seed_kernels();
    kernels.push(enigma_kernels::two_pass_sum::reduce_final_seed());
    for kernel in kernels {
        if let Err(e) = validate(&kernel, &ValidationOptions::default()) {
            panic!("{e}");
        }
    }
}
