//! Kernels nested as deep as the IR's JSON form carries run on the
//! simulator: lowering and execution handle the depth the front ends can
//! now send (issue 18, defect 4).

use enigma_ir::{builder::*, text, Access, Type};
use enigma_runtime::{Arg, Device, Runtime};

#[test]
fn the_deepest_expression_the_json_form_carries_runs() {
    let mut k = KernelBuilder::new("deep");
    let a = k.buffer("A", Type::U32, Access::ReadWrite);
    let tid = k.let_("tid", thread_position_in_grid().x());
    let mut e = a.get(tid);
    let levels = text::MAX_JSON_DEPTH / 2 - 16;
    for _ in 0..levels {
        e = !e;
    }
    k.store(a.at(tid), e);
    let kernel = text::from_json(&text::to_json(&k.finish().unwrap())).unwrap_or_else(|e| panic!("{}", e.message));
    let rt = Runtime::new(Device::Sim).unwrap();
    let input: Vec<u32> = (0..64).map(|i| i * 0x0101_0101).collect();
    let buf = rt.buffer_from(&input).unwrap();
    rt.dispatch_threads(&rt.pipeline(&kernel).unwrap(), &[Arg::from(&buf)], [64, 1, 1], [32, 1, 1]).unwrap();
    // An even number of bit-nots is the identity, an odd one the complement.
    let want: Vec<u32> = input.iter().map(|&x| if levels & 1 == 0 { x } else { !x }).collect();
    assert_eq!(buf.to_vec::<u32>().unwrap(), want);
}
