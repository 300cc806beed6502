//! Prints the merged CRD as JSON (development aid).
fn main() {
    println!(
        "{}",
        serde_json::to_string_pretty(&memcached_api::crd()).unwrap_or_default()
    );
}
