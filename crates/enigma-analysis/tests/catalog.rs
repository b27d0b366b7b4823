//! The device catalogue: seed 004's chip tables, lookups, variants, errors.

use enigma_analysis::catalog::{self, CatalogError, DeviceSpec, SpecOrigin};

#[test]
fn seed004_base_chips() {
    // (id, min cores, max cores, GB/s, bf16, family) from seed 004's table.
    for (id, min, max, bw, bf16, family) in [
        ("m1", 7, 8, 68.0, false, "Apple 7"),
        ("m2", 8, 10, 100.0, false, "Apple 8"),
        ("m3", 10, 10, 100.0, true, "Apple 9"),
        ("m4", 10, 10, 120.0, true, "Apple 9+"),
    ] {
        let d = catalog::find(id).unwrap();
        assert_eq!((d.gpu_cores_min, d.gpu_cores_max, d.gpu_cores), (min, max, max), "{id}");
        assert_eq!(d.memory_bandwidth_gb_s, Some(bw), "{id}");
        assert_eq!(d.bf16, Some(bf16), "{id}");
        assert_eq!(d.family.as_deref(), Some(family), "{id}");
        assert_eq!(d.simd_width, 32);
        assert_eq!(d.max_threads_per_threadgroup, 1024);
        assert_eq!(d.threadgroup_memory_bytes, 32_768);
        assert_eq!(d.origin, SpecOrigin::Catalog);
        assert!(!d.sources.is_empty());
    }
}

#[test]
fn seed004_pro_max_chips_and_seed000_m2_ultra() {
    for (id, min, max, bw) in [
        ("m1-pro", 14, 16, Some(200.0)),
        ("m1-max", 24, 32, Some(400.0)),
        ("m2-max", 30, 38, Some(400.0)),
        ("m3-max", 40, 40, Some(400.0)),
        ("m4-pro", 20, 20, Some(273.0)),
        ("m4-max", 40, 40, Some(546.0)),
        ("m2-ultra", 76, 76, None),
    ] {
        let d = catalog::find(id).unwrap();
        assert_eq!((d.gpu_cores_min, d.gpu_cores_max), (min, max), "{id}");
        assert_eq!(d.memory_bandwidth_gb_s, bw, "{id}");
    }
    assert_eq!(catalog::all().len(), 12);
}

#[test]
fn m4_max_matches_seed002_and_has_a_machine_balance() {
    let d = catalog::find("M4 Max").unwrap();
    assert_eq!(d.gpu_cores, 40);
    assert_eq!(d.fp16_tflops, Some(32.0));
    let balance = d.machine_balance().unwrap();
    assert!((balance - 32e12 / 546e9).abs() < 1e-9);
    assert_eq!(format!("{balance:.0}"), "59"); // "roughly 59 FLOPs/byte"
    // No other chip has an FP16 throughput (the M5's is not published).
    for other in catalog::all().into_iter().filter(|d| d.id != "m4-max") {
        assert_eq!(other.fp16_tflops, None, "{}", other.id);
        assert_eq!(other.machine_balance(), None);
    }
}

#[test]
fn find_ignores_case_and_punctuation() {
    for name in ["m4-max", "M4 Max", "m4max", "Apple M4 Max", "M4_MAX", " m4 - max "] {
        assert_eq!(catalog::find(name).unwrap().id, "m4-max", "{name}");
    }
    assert_eq!(catalog::find("m1").unwrap().id, "m1");
    assert_eq!(catalog::find("M1 Pro").unwrap().id, "m1-pro");
    assert_eq!(catalog::find("m2ultra").unwrap().gpu_cores, 76);
}

#[test]
fn core_variants() {
    let d = catalog::find("m1-max-24").unwrap();
    assert_eq!(d.gpu_cores, 24);
    assert_eq!(d.id, "m1-max-24c");
    assert!(d.name.contains("24-core"));
    assert_eq!(catalog::find("M1 Max 32-core").unwrap().gpu_cores, 32);
    assert_eq!(catalog::find("m1 7c").unwrap().gpu_cores, 7);
    let m1 = catalog::find("m1").unwrap();
    let v = m1.variants();
    assert_eq!(v.iter().map(|d| d.gpu_cores).collect::<Vec<_>>(), vec![7, 8]);
    assert_eq!(catalog::find("m4-max").unwrap().variants().len(), 1);
    assert_eq!(m1.cores_label(), "7–8");
    assert_eq!(catalog::find("m3").unwrap().cores_label(), "10");
}

#[test]
fn error_unknown_device_lists_known_ones() {
    let e = catalog::find("rtx 9090").unwrap_err();
    match &e {
        CatalogError::UnknownDevice { name, known } => {
            assert_eq!(name, "rtx 9090");
            assert!(known.contains(&"m4-max".to_string()));
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(e.to_string().contains("m2-ultra"));
    assert!(matches!(catalog::find(""), Err(CatalogError::UnknownDevice { .. })));
    assert!(matches!(catalog::find("m4 maximum"), Err(CatalogError::UnknownDevice { .. })));
}

#[test]
fn error_core_variant_out_of_range() {
    let e = catalog::find("m1-max-20").unwrap_err();
    assert_eq!(e, CatalogError::CoresOutOfRange { device: "Apple M1 Max".to_string(), requested: 20, min: 24, max: 32 });
    assert_eq!(e.to_string(), "Apple M1 Max comes with 24–32 GPU cores; a 20-core variant does not exist");
}

#[test]
fn error_invalid_runtime_spec() {
    let mut d = DeviceSpec::custom("NVIDIA H100", 132);
    d.vendor = "NVIDIA".to_string();
    d.origin = SpecOrigin::Runtime;
    d.threadgroup_memory_bytes = 48 * 1024;
    d.threadgroup_memory_per_core_bytes = 228 * 1024;
    d.max_threads_per_core = Some(2048);
    d.max_simdgroups_per_core = Some(64);
    d.max_threadgroups_per_core = Some(32);
    assert!(d.validate().is_ok());
    let mut bad = d.clone();
    bad.simd_width = 0;
    assert!(matches!(bad.validate(), Err(CatalogError::InvalidSpec { field: "simd_width", value: 0, .. })));
    let mut bad = d.clone();
    bad.max_threads_per_core = Some(0);
    assert!(matches!(bad.validate(), Err(CatalogError::InvalidSpec { field: "max_threads_per_core", .. })));
    let mut bad = d;
    bad.gpu_cores_min = 200;
    assert!(matches!(bad.validate(), Err(CatalogError::InvalidSpec { field: "gpu_cores_min", value: 200, .. })));
}

#[test]
fn specs_round_trip_through_json() {
    for d in catalog::all() {
        let s = serde_json::to_string(&d).unwrap();
        let back: DeviceSpec = serde_json::from_str(&s).unwrap();
        assert_eq!(back, d);
    }
}

#[test]
fn m5_has_its_announced_bandwidth_and_no_fp16_throughput() {
    let d = catalog::find("Apple M5").unwrap();
    assert_eq!((d.id.as_str(), d.gpu_cores), ("m5", 10));
    assert_eq!(d.memory_bandwidth_gb_s, Some(153.0));
    assert_eq!((d.fp16_tflops, d.family.as_deref(), d.bf16), (None, None, Some(true)));
    assert!(d.sources.iter().any(|s| s.contains("M5 announcement")), "{:?}", d.sources);
}
