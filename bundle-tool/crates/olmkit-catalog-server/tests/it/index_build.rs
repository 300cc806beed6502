//! The catalog index built from real catalogs: a reviewed snapshot of what the server keeps in
//! memory for the edge-case catalog, the whole-file fallback for files the splitter cannot cut,
//! the payloads read back through spans, and load errors that match the catalog loader's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use olmkit_catalog_server::build::{BuildIndexError, BuildOptions, build_index};
use olmkit_catalog_server::catalog::Catalog;
use olmkit_catalog_server::index::{decode_index, encode_index};
use olmkit_catalog_server::query;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../tests/fixtures")
}

fn catalog(dir: &Path) -> Catalog {
    let built = build_index(dir, &BuildOptions::default()).unwrap();
    Catalog::new(dir, built.index, dir).unwrap()
}

/// The index without checksums (they change with any byte of the fixture) as reviewable text.
fn summary(index: &olmkit_catalog_server::CatalogIndex) -> String {
    let mut idx = index.clone();
    let spans = idx
        .bundles
        .iter_mut()
        .filter_map(|b| b.span.as_mut())
        .chain(idx.others.iter_mut().filter_map(|o| o.span.as_mut()));
    for s in spans {
        assert_eq!(s.sha256.len(), 32, "every span carries a SHA-256");
        s.sha256.clear();
    }
    format!("{idx:#?}")
}

#[test]
fn edge_catalog_index_snapshot() {
    let dir = fixtures().join("registry/edge-catalog");
    let built = build_index(&dir, &BuildOptions::default()).unwrap();
    assert!(built.report.findings.is_empty(), "{:?}", built.report);
    // Encoding is deterministic and lossless.
    let bytes = encode_index(&built.index);
    assert_eq!(
        bytes,
        encode_index(&build_index(&dir, &BuildOptions::default()).unwrap().index)
    );
    assert_eq!(decode_index(Path::new("x"), &bytes).unwrap(), built.index);
    insta::assert_snapshot!(summary(&built.index));
}

#[test]
fn synthetic_csv_snapshot() {
    let dir = fixtures().join("registry/edge-catalog");
    let cat = catalog(&dir);
    let b = query::get_bundle(&cat, "beta-op", "fast", "beta-op.v1.0.0").unwrap();
    assert_eq!(b.object, vec![b.csv_json.clone()]);
    insta::assert_snapshot!(b.csv_json);
}

#[test]
fn files_the_splitter_cannot_cut_are_loaded_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // A YAML directive makes the first piece unparsable on its own.
    std::fs::write(
        dir.join("catalog.yaml"),
        concat!(
            "%YAML 1.2\n---\nschema: olm.package\nname: p\ndefaultChannel: c\n",
            "---\nschema: olm.channel\nname: c\npackage: p\nentries:\n- name: p.v1.0.0\n",
            "---\nschema: olm.bundle\nname: p.v1.0.0\npackage: p\nimage: example.com/p:v1\n",
            "properties:\n- type: olm.package\n  value: {packageName: p, version: 1.0.0}\n",
            "- type: olm.bundle.object\n  value: {data: eyJraW5kIjoiQ2x1c3RlclNlcnZpY2VWZXJzaW9uIn0=}\n",
        ),
    )
    .unwrap();
    let built = build_index(dir, &BuildOptions::default()).unwrap();
    let span = built.index.bundles[0].span.clone().unwrap();
    assert!(span.whole_file, "{span:?}");
    assert_eq!(span.document, 2);
    let cat = Catalog::new(dir, built.index, dir).unwrap();
    let b = query::get_bundle(&cat, "p", "c", "p.v1.0.0").unwrap();
    assert_eq!(b.csv_json, r#"{"kind":"ClusterServiceVersion"}"#);
}

#[test]
fn load_errors_match_the_catalog_loader() {
    let invalid = fixtures().join("fbc-examples/invalid");
    for case in [
        "parse-invalid-bundle-json",
        "parse-invalid-package-json",
        "parse-no-schema",
        "parse-not-yaml-or-json",
        "parse-not-yaml-or-json-object",
    ] {
        let dir = invalid.join(case);
        let ours = match build_index(&dir, &BuildOptions::default()) {
            Err(BuildIndexError::Load(e)) => e.to_string(),
            other => panic!("{case}: {other:?}"),
        };
        let theirs = olmkit_catalog::declcfg::load_dir(&dir, &Default::default())
            .unwrap_err()
            .to_string();
        assert_eq!(ours, theirs, "{case}");
    }
}

#[test]
fn invalid_catalogs_report_every_problem() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Two broken bundle objects and two csv.metadata properties on one bundle.
    std::fs::write(
        dir.join("c.json"),
        r#"{"schema":"olm.package","name":"p","defaultChannel":"c"}
{"schema":"olm.channel","name":"c","package":"p","entries":[{"name":"p.v1.0.0"}]}
{"schema":"olm.bundle","name":"p.v1.0.0","package":"p","image":"example.com/p:v1","properties":[
 {"type":"olm.package","value":{"packageName":"p","version":"1.0.0"}},
 {"type":"olm.bundle.object","value":{"ref":"../../etc/passwd"}},
 {"type":"olm.bundle.object","value":{"ref":"missing.yaml"}},
 {"type":"olm.csv.metadata","value":{"displayName":"a"}},
 {"type":"olm.csv.metadata","value":{"installModes":[{"type":"OwnNamespace","supported":"yes"}]}}]}
"#,
    )
    .unwrap();
    let Err(BuildIndexError::Invalid { report, .. }) = build_index(dir, &BuildOptions::default())
    else {
        panic!("should be invalid")
    };
    let text = report.render_text();
    assert!(text.contains("outside the catalog"), "{text}");
    assert!(text.contains("missing.yaml"), "{text}");
    assert!(
        text.contains("expected at most 1 property of type \"olm.csv.metadata\", found 2"),
        "{text}"
    );
    assert!(text.contains("installModes[0].supported"), "{text}");
    assert_eq!(report.counts().errors, 4, "{text}");
}
