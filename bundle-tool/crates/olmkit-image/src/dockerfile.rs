//! Dockerfiles equivalent to the images we build, for users who do have Docker or podman.
//!
//! [`catalog_dockerfile`] writes a `catalog.Dockerfile` that produces what
//! `bundle-tool image build catalog` produces: the FBC at `/configs`, the
//! `operators.operatorframework.io.index.configs.v1` label, the server at
//! `/bin/catalog-server` as entrypoint with the same arguments, user and port. Its default base,
//! `gcr.io/distroless/static:nonroot`, holds what our base layer holds (`/etc/passwd` and
//! `/etc/group` with `nonroot` 65532, `/tmp`, `/home/nonroot`), plus CA certificates; `FROM
//! scratch` also works because the user is numeric. The `opm` variant mirrors
//! `opm generate dockerfile` for teams that keep opm's image.
//!
//! [`parse_instructions`] reads Dockerfiles back (continuations, comments, exec-form JSON) so
//! tests and [`bundle_dockerfile_drift`] can compare a Dockerfile with an image.

use crate::paths::{
    CATALOG_PORT, CATALOG_SERVER_PATH, CONFIGS_DIR, CONFIGS_LABEL, HEALTH_PROBE_PATH, INDEX_PATH,
};
use crate::tree::Owner;
use olmkit_core::dockerfile::{label_value, parse_labels};
use std::collections::BTreeMap;

/// The documented base equivalent to our base layer.
pub const DISTROLESS_NONROOT: &str = "gcr.io/distroless/static:nonroot";
/// `opm`'s image (has `/bin/opm` and `/bin/grpc_health_probe`).
pub const OPM_IMAGE: &str = "quay.io/operator-framework/opm:latest";

/// What the generated Dockerfile starts from and runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CatalogBase {
    /// Our static catalog server, copied from the build context.
    Server {
        /// Base image (`scratch` or [`DISTROLESS_NONROOT`]).
        from: String,
        /// Path of the static server binary in the build context.
        server: String,
        /// Path of a static `grpc_health_probe` in the build context, if any.
        health_probe: Option<String>,
        /// Server arguments (the `CMD`).
        args: Vec<String>,
        /// User.
        user: Owner,
    },
    /// An image that already has a server (like `opm generate dockerfile`).
    Image {
        /// Base image, e.g. [`OPM_IMAGE`].
        from: String,
        /// `ENTRYPOINT`.
        entrypoint: Vec<String>,
        /// `CMD`.
        cmd: Vec<String>,
    },
    /// `FROM scratch` with the FBC and label only.
    ConfigsOnly,
}

impl CatalogBase {
    /// Our server on distroless, with the default arguments and user.
    pub fn server(server: impl Into<String>) -> Self {
        CatalogBase::Server {
            from: DISTROLESS_NONROOT.into(),
            server: server.into(),
            health_probe: None,
            args: crate::paths::default_server_args(),
            user: Owner::NONROOT,
        }
    }
    /// `opm serve` from opm's image, as `opm generate dockerfile` writes it.
    pub fn opm() -> Self {
        CatalogBase::Image {
            from: OPM_IMAGE.into(),
            entrypoint: vec!["/bin/opm".into()],
            cmd: vec![
                "serve".into(),
                CONFIGS_DIR.into(),
                "--cache-dir=/tmp/cache".into(),
            ],
        }
    }
}

/// Options of [`catalog_dockerfile`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogDockerfile {
    /// Path of the FBC directory in the build context (e.g. `catalog`).
    pub configs_dir: String,
    /// Path of a precomputed serving index in the build context, copied to `/index`.
    pub index: Option<String>,
    /// Base and server.
    pub base: CatalogBase,
    /// Extra labels (e.g. `org.opencontainers.image.*`).
    pub labels: BTreeMap<String, String>,
}

fn json_array(items: &[String]) -> String {
    serde_json::to_string(items).unwrap_or_else(|_| "[]".into())
}

/// Renders `catalog.Dockerfile`.
pub fn catalog_dockerfile(opts: &CatalogDockerfile) -> String {
    let mut out = String::from(match &opts.base {
        CatalogBase::Image { .. } => {
            "# Catalog image for Docker or podman, served by the base image's server (the layout\n\
             # `opm generate dockerfile` writes).\n"
        }
        _ => {
            "# Catalog image for Docker or podman. `bundle-tool image build catalog` builds the same\n\
             # image without a container engine: same paths, label, entrypoint, arguments and user.\n"
        }
    });
    match &opts.base {
        CatalogBase::Server {
            from,
            server,
            health_probe,
            ..
        } => {
            if from == DISTROLESS_NONROOT {
                out.push_str(
                    "# distroless static:nonroot provides what bundle-tool's base layer does:\n\
                     # /etc/passwd and /etc/group with nonroot (65532), /tmp and /home/nonroot.\n",
                );
            }
            out.push_str(&format!("FROM {from}\n\n"));
            out.push_str("# Static catalog server (hack/build-static.sh builds it).\n");
            out.push_str(&format!("COPY {server} {CATALOG_SERVER_PATH}\n"));
            if let Some(p) = health_probe {
                out.push_str("# OLM probes catalog pods with `grpc_health_probe -addr=:50051`.\n");
                out.push_str(&format!("COPY {p} {HEALTH_PROBE_PATH}\n"));
            }
        }
        CatalogBase::Image { from, .. } => {
            out.push_str(&format!("FROM {from}\n"));
        }
        CatalogBase::ConfigsOnly => out.push_str("FROM scratch\n"),
    }
    out.push_str("\n# The declarative config root, where the label below says it is.\n");
    out.push_str(&format!("ADD {} {CONFIGS_DIR}\n", opts.configs_dir));
    if let Some(i) = &opts.index {
        out.push_str(&format!("COPY {i} {INDEX_PATH}\n"));
    }
    let mut labels = opts.labels.clone();
    labels.insert(CONFIGS_LABEL.into(), CONFIGS_DIR.into());
    for (k, v) in &labels {
        out.push_str(&format!("LABEL {k}={}\n", label_value(v)));
    }
    match &opts.base {
        CatalogBase::Server { args, user, .. } => {
            out.push_str(&format!(
                "\nUSER {}:{}\nEXPOSE {CATALOG_PORT}\nENTRYPOINT {}\nCMD {}\n",
                user.uid,
                user.gid,
                json_array(&[CATALOG_SERVER_PATH.to_string()]),
                json_array(args)
            ));
        }
        CatalogBase::Image {
            entrypoint, cmd, ..
        } => {
            out.push_str(&format!(
                "\nENTRYPOINT {}\nCMD {}\n",
                json_array(entrypoint),
                json_array(cmd)
            ));
        }
        CatalogBase::ConfigsOnly => {}
    }
    out
}

/// One instruction of a Dockerfile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instruction {
    /// Upper-cased keyword (`FROM`, `COPY`, ...).
    pub keyword: String,
    /// Everything after the keyword, continuations joined.
    pub args: String,
    /// 1-based line where it starts.
    pub line: usize,
}

impl Instruction {
    /// Exec-form (JSON array) arguments, if the instruction uses that form.
    pub fn exec_form(&self) -> Option<Vec<String>> {
        let t = self.args.trim();
        if t.starts_with('[') {
            serde_json::from_str(t).ok()
        } else {
            None
        }
    }

    /// For `COPY`/`ADD`: `(sources, destination)`, skipping `--flags`.
    pub fn copy_paths(&self) -> Option<(Vec<String>, String)> {
        let mut words: Vec<String> = match self.exec_form() {
            Some(w) => w,
            None => self
                .args
                .split_whitespace()
                .filter(|w| !w.starts_with("--"))
                .map(str::to_string)
                .collect(),
        };
        let dest = words.pop()?;
        if words.is_empty() {
            return None;
        }
        Some((words, dest))
    }
}

/// Splits a Dockerfile into instructions (comments and blank lines dropped, `\` continuations
/// joined).
pub fn parse_instructions(text: &str) -> Vec<Instruction> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if current.is_none() && (line.is_empty() || line.starts_with('#')) {
            continue;
        }
        if current.is_some() && line.starts_with('#') {
            continue;
        }
        let (body, continues) = match line.strip_suffix('\\') {
            Some(b) => (b.trim_end(), true),
            None => (line, false),
        };
        let entry = current.get_or_insert_with(|| (i + 1, String::new()));
        if !entry.1.is_empty() {
            entry.1.push(' ');
        }
        entry.1.push_str(body);
        if !continues && let Some((start, full)) = current.take() {
            let (kw, args) = full.split_once(char::is_whitespace).unwrap_or((&full, ""));
            out.push(Instruction {
                keyword: kw.to_ascii_uppercase(),
                args: args.trim().to_string(),
                line: start,
            });
        }
    }
    if let Some((start, full)) = current {
        let (kw, args) = full.split_once(char::is_whitespace).unwrap_or((&full, ""));
        out.push(Instruction {
            keyword: kw.to_ascii_uppercase(),
            args: args.trim().to_string(),
            line: start,
        });
    }
    out
}

/// Destinations where our bundle image puts a bundle's folders, by folder.
pub const BUNDLE_PATHS: [(&str, &str); 3] = [
    ("manifests", "/manifests/"),
    ("metadata", "/metadata/"),
    ("tests/scorecard", "/tests/scorecard/"),
];

/// Differences between a bundle's `bundle.Dockerfile` and the image `bundle-tool image build
/// bundle` makes from it (labels from `metadata/annotations.yaml`, folders at
/// [`BUNDLE_PATHS`]). Empty when both produce the same image.
pub fn bundle_dockerfile_drift(
    dockerfile: &str,
    annotations: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut drift = Vec::new();
    let instructions = parse_instructions(dockerfile);
    let labels = parse_labels(dockerfile);
    for (k, v) in annotations {
        match labels.get(k) {
            None => drift.push(format!(
                "bundle.Dockerfile has no LABEL {k} (metadata/annotations.yaml sets it to {v:?})"
            )),
            Some(l) if l != v => drift.push(format!(
                "bundle.Dockerfile LABEL {k}={l:?} differs from metadata/annotations.yaml ({v:?})"
            )),
            _ => {}
        }
    }
    for k in labels.keys() {
        if !annotations.contains_key(k) {
            drift.push(format!(
                "bundle.Dockerfile LABEL {k} is not in metadata/annotations.yaml"
            ));
        }
    }
    for ins in &instructions {
        match ins.keyword.as_str() {
            "FROM" if ins.args.trim() != "scratch" => drift.push(format!(
                "bundle.Dockerfile line {}: FROM {} (bundle images are FROM scratch)",
                ins.line, ins.args
            )),
            "COPY" | "ADD" => {
                let Some((srcs, dest)) = ins.copy_paths() else {
                    continue;
                };
                let expected = srcs.iter().all(|s| {
                    let s = s.trim_end_matches('/');
                    BUNDLE_PATHS.iter().any(|(src, d)| {
                        s.ends_with(src) && d.trim_end_matches('/') == dest.trim_end_matches('/')
                    })
                });
                if !expected {
                    drift.push(format!(
                        "bundle.Dockerfile line {}: {} {} {dest} does not match the bundle layout \
                         (manifests/ → /manifests/, metadata/ → /metadata/, tests/scorecard/ → /tests/scorecard/)",
                        ins.line,
                        ins.keyword,
                        srcs.join(" ")
                    ));
                }
            }
            _ => {}
        }
    }
    drift
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_continuations_comments_and_exec_form() {
        let text = "# c\nFROM scratch\nLABEL a=b \\\n  # inner comment\n  c=d\nCOPY --chown=1:1 x y /dst/\nENTRYPOINT [\"/bin/a\", \"b\"]\n";
        let ins = parse_instructions(text);
        assert_eq!(ins.len(), 4);
        assert_eq!(ins[1].keyword, "LABEL");
        assert_eq!(ins[1].args, "a=b c=d");
        assert_eq!(
            ins[2].copy_paths(),
            Some((vec!["x".into(), "y".into()], "/dst/".into()))
        );
        assert_eq!(ins[3].exec_form(), Some(vec!["/bin/a".into(), "b".into()]));
        assert_eq!(ins[3].line, 7);
    }

    #[test]
    fn catalog_dockerfiles() {
        let df = catalog_dockerfile(&CatalogDockerfile {
            configs_dir: "catalog".into(),
            index: None,
            base: CatalogBase::server("catalog-server"),
            labels: BTreeMap::new(),
        });
        insta::assert_snapshot!("catalog_dockerfile_server", df);
        let opm = catalog_dockerfile(&CatalogDockerfile {
            configs_dir: "catalog".into(),
            index: None,
            base: CatalogBase::opm(),
            labels: BTreeMap::new(),
        });
        insta::assert_snapshot!("catalog_dockerfile_opm", opm);
    }

    #[test]
    fn bundle_drift() {
        let ann = BTreeMap::from([
            (
                "operators.operatorframework.io.bundle.package.v1".to_string(),
                "p".to_string(),
            ),
            (
                "operators.operatorframework.io.bundle.channels.v1".to_string(),
                "a,b".to_string(),
            ),
        ]);
        let good = "FROM scratch\nLABEL operators.operatorframework.io.bundle.package.v1=p\nLABEL operators.operatorframework.io.bundle.channels.v1=a,b\nCOPY manifests /manifests/\nCOPY metadata /metadata/\nCOPY tests/scorecard /tests/scorecard/\n";
        assert!(
            bundle_dockerfile_drift(good, &ann).is_empty(),
            "{:?}",
            bundle_dockerfile_drift(good, &ann)
        );
        // operator-sdk's form, run from the project root
        let sdk = good
            .replace("COPY manifests", "COPY bundle/manifests")
            .replace("COPY metadata", "COPY bundle/metadata");
        assert!(bundle_dockerfile_drift(&sdk, &ann).is_empty());
        let bad = good.replace("a,b", "a").replace("/metadata/", "/meta/");
        let d = bundle_dockerfile_drift(&bad, &ann);
        assert_eq!(d.len(), 2, "{d:?}");
    }
}
