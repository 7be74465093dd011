// Compiles the small C helper that gives INCRBYFLOAT Redis's exact `long double` arithmetic and
// formatting (Rust has no extended-precision float type).
fn main() {
    println!("cargo:rerun-if-changed=csrc/ldouble.c");
    cc::Build::new()
        .file("csrc/ldouble.c")
        .opt_level(2)
        .warnings(true)
        .compile("dfly_ldouble");
}
