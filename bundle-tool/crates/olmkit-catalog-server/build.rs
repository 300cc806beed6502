//! Compiles the project's own protos with protox (pure Rust, no `protoc`) and generates the
//! prost messages and tonic services, plus an encoded descriptor set for gRPC reflection.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = ["proto/registry.proto", "proto/index.proto"];
    for p in protos {
        println!("cargo:rerun-if-changed={p}");
    }
    // protox ships google/protobuf/*.proto (struct.proto is imported by registry.proto).
    let fds = protox::compile(protos, ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    // Reflection serves only the public API; the index format is private.
    let mut public = fds.clone();
    public.file.retain(|f| f.name() != "index.proto");
    std::fs::write(
        out.join("registry_descriptor.bin"),
        prost::Message::encode_to_vec(&public),
    )?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .build_transport(false)
        .compile_fds(fds)?;
    Ok(())
}
