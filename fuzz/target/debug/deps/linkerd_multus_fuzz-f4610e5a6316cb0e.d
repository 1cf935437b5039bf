/work/main/fuzz/target/debug/deps/linkerd_multus_fuzz-f4610e5a6316cb0e.d: src/main.rs src/targets.rs Cargo.toml

/work/main/fuzz/target/debug/deps/liblinkerd_multus_fuzz-f4610e5a6316cb0e.rmeta: src/main.rs src/targets.rs Cargo.toml

src/main.rs:
src/targets.rs:
Cargo.toml:

# env-dep:CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
# env-dep:CLIPPY_CONF_DIR
