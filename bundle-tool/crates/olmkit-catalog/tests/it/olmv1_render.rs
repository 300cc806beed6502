//! `bundle_findings` on a real bundle directory whose `metadata/properties.yaml` opm's render
//! refuses: the OLM v1 checks cannot run, and one `olmv1-render` error says why instead of an
//! empty (clean-looking) report.
#![allow(clippy::unwrap_used)]

use olmkit_bundle::load::load_bundle_dir;
use olmkit_catalog::olmv1::bundle_findings;
use std::path::Path;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

#[test]
fn a_bundle_that_does_not_render_gets_one_olmv1_render_error() {
    let released =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../bundle/memcached-operator/0.4.0");
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&released, tmp.path());
    // The released bundle renders and has no OLM v1 error.
    let clean = bundle_findings(&load_bundle_dir(tmp.path()).unwrap());
    assert!(clean.iter().all(|f| f.rule != "olmv1-render"), "{clean:?}");

    // A string is not a property opm can decode.
    std::fs::write(
        tmp.path().join("metadata/properties.yaml"),
        "properties:\n  - not a property\n",
    )
    .unwrap();
    let findings = bundle_findings(&load_bundle_dir(tmp.path()).unwrap());
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0].rule, "olmv1-render");
    assert_eq!(
        findings[0].file.as_deref(),
        Some("metadata/properties.yaml")
    );
    assert!(
        findings[0].message.contains("metadata/properties.yaml"),
        "{}",
        findings[0].message
    );
}
