//! Where things live in a catalog image (paths, port, label) and how its server is started:
//! shared by the image builder (`images`) and the Dockerfile writer (`dockerfile`), so that
//! neither imports the other for them.

/// The label OLM reads to find the FBC inside a catalog image.
pub const CONFIGS_LABEL: &str = "operators.operatorframework.io.index.configs.v1";

/// Where the catalog goes inside a catalog image.
pub const CONFIGS_DIR: &str = "/configs";

/// Where the catalog server goes inside a catalog image.
pub const CATALOG_SERVER_PATH: &str = "/bin/catalog-server";

/// Where a precomputed catalog index goes (next to `/configs`, where the server looks).
pub const INDEX_PATH: &str = "/index";

/// The health probe OLM execs in catalog pods.
pub const HEALTH_PROBE_PATH: &str = "/bin/grpc_health_probe";

/// Port OLM connects to in catalog pods.
pub const CATALOG_PORT: u16 = 50051;

/// `/configs --port 50051`: the arguments of the `catalog-server` binary (`bundle-tool serve`
/// takes the same after its subcommand).
pub fn default_server_args() -> Vec<String> {
    vec![
        CONFIGS_DIR.into(),
        "--port".into(),
        CATALOG_PORT.to_string(),
    ]
}
