//! Tells the code whether the wasm it is compiled into will be split (ADR 0030).
//!
//! `cargo leptos build --split` links the wasm with `--emit-relocs` (the relocations
//! wasm-split reads to cut the module at the `#[lazy]` functions); without `--split` the module
//! stays whole, and a `#[lazy]` function would import a loader nothing provides. So the
//! functions meant to be loaded lazily are `#[lazy]` only under `cfg(wasm_split)`, set here when
//! the wasm is linked for splitting: a plain `cargo leptos build` or `watch` builds the whole
//! module as before, and `--split` the split one, from the same sources.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(wasm_split)");
    println!("cargo::rerun-if-changed=build.rs");
    // cargo-leptos passes the flag through RUSTFLAGS; cargo hands the script the flags it
    // compiles the crate with.
    println!("cargo::rerun-if-env-changed=RUSTFLAGS");
    let wasm = std::env::var("CARGO_CFG_TARGET_ARCH").is_ok_and(|arch| arch == "wasm32");
    let relocations = std::env::var("CARGO_ENCODED_RUSTFLAGS").is_ok_and(|flags| {
        flags
            .split('\u{1f}')
            .any(|flag| flag.contains("--emit-relocs"))
    });
    if wasm && relocations {
        println!("cargo::rustc-cfg=wasm_split");
    }
}
