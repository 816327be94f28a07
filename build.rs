//! Compiles the shared kernel logic (cuda/*.cuh) for the host through
//! cuda/gt_host.cpp (the CPU backend) and cuda/gt_host_checked.cpp (the CUDA
//! backend's emulator, its block lanes checked): both call the very
//! functions the CUDA kernels wrap. Also tells the crate which
//! `tokenizers` version Cargo.lock pinned, for `gpu_tok.info()`, and passes on
//! pyo3's Python version cfgs.

fn main() {
    // pyo3's version cfgs (`Py_3_14`...), for what CPython's C API offers per version.
    pyo3_build_config::use_pyo3_cfgs();
    println!("cargo:rerun-if-changed=cuda");
    println!("cargo:rerun-if-changed=Cargo.lock");
    cc::Build::new()
        .cpp(true)
        .file("cuda/gt_host.cpp")
        .file("cuda/gt_host_checked.cpp")
        .include("cuda")
        .opt_level(3)
        .flag_if_supported("-std=c++17")
        .flag_if_supported("-fno-exceptions")
        .flag_if_supported("-fno-rtti")
        .warnings(true)
        .compile("gt_kernels");
    println!(
        "cargo:rustc-env=GPU_TOK_TOKENIZERS_VERSION={}",
        locked_version("tokenizers").unwrap_or_else(|| "unknown".into())
    );
}

/// The version of `package` in Cargo.lock.
fn locked_version(package: &str) -> Option<String> {
    let lock = std::fs::read_to_string("Cargo.lock").ok()?;
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line == format!("name = \"{package}\"") {
            let version = lines.next()?.strip_prefix("version = \"")?;
            return Some(version.trim_end_matches('"').to_string());
        }
    }
    None
}
