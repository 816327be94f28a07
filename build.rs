//! Compiles the shared kernel logic (cuda/*.cuh) for the host: the CPU backend
//! calls the very functions the CUDA kernels wrap.

fn main() {
    println!("cargo:rerun-if-changed=rust/cpu/kernels.cpp");
    println!("cargo:rerun-if-changed=cuda");
    cc::Build::new()
        .cpp(true)
        .file("rust/cpu/kernels.cpp")
        .include("cuda")
        .opt_level(3)
        .flag_if_supported("-std=c++17")
        .flag_if_supported("-fno-exceptions")
        .flag_if_supported("-fno-rtti")
        .warnings(true)
        .compile("gt_kernels");
}
