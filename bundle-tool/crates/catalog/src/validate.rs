//! Validation of a File-Based Catalog with every rule `opm validate` enforces.
//!
//! opm checks in two stages: converting blobs into its model (`declcfg_to_model.go`: names,
//! duplicates, `olm.package` property, versions, image pull specs, channel membership,
//! deprecations) and validating the model (`model.go`: default channel, one head per channel
//! computed from `replaces` and `skips` only, no replaces cycle, no stranded bundle, skips,
//! skipRange, unique versions). opm stops at the first error; this validator reports every
//! problem, each with a stable rule id, the package/channel/bundle it concerns and the file it
//! came from, and keeps opm's wording in the message so that people searching for an opm error
//! find it. It never does I/O.

use crate::declcfg::{
    Bundle, DeclarativeConfig, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_PACKAGE, load::Origins,
};
use crate::property;
use crate::version_range::VersionRange;
use olmkit_core::findings::{Finding, Report};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// Stable rule ids of catalog findings.
pub mod rules {
    /// Package blob without a name.
    pub const PACKAGE_NAME: &str = "package-name";
    /// Two `olm.package` blobs with one name.
    pub const DUPLICATE_PACKAGE: &str = "duplicate-package";
    /// A channel, bundle or deprecation of a package that has no `olm.package` blob.
    pub const UNKNOWN_PACKAGE: &str = "unknown-package";
    /// A channel without a name.
    pub const CHANNEL_NAME: &str = "channel-name";
    /// Two channels with one name in a package.
    pub const DUPLICATE_CHANNEL: &str = "duplicate-channel";
    /// Two entries with one name in a channel.
    pub const DUPLICATE_ENTRY: &str = "duplicate-channel-entry";
    /// A bundle without a package.
    pub const BUNDLE_PACKAGE: &str = "bundle-package";
    /// Two bundles with one name in a package.
    pub const DUPLICATE_BUNDLE: &str = "duplicate-bundle";
    /// A property whose value does not parse.
    pub const BUNDLE_PROPERTIES: &str = "bundle-properties";
    /// Not exactly one `olm.package` property, or one naming another package.
    pub const PACKAGE_PROPERTY: &str = "package-property";
    /// A version that is not semver.
    pub const BUNDLE_VERSION: &str = "bundle-version";
    /// An image pull spec that does not parse.
    pub const IMAGE_PULLSPEC: &str = "image-pullspec";
    /// A bundle without image and objects.
    pub const BUNDLE_IMAGE: &str = "bundle-image";
    /// A bundle in no channel.
    pub const BUNDLE_NOT_IN_CHANNEL: &str = "bundle-not-in-channel";
    /// A channel entry without a bundle blob.
    pub const ENTRY_WITHOUT_BUNDLE: &str = "entry-without-bundle";
    /// A default channel that is unset or does not exist.
    pub const DEFAULT_CHANNEL: &str = "default-channel";
    /// A package without channels.
    pub const PACKAGE_CHANNELS: &str = "package-channels";
    /// A channel without entries.
    pub const CHANNEL_EMPTY: &str = "channel-empty";
    /// Zero or several channel heads.
    pub const CHANNEL_HEAD: &str = "channel-head";
    /// A cycle in the replaces chain.
    pub const REPLACES_CYCLE: &str = "replaces-cycle";
    /// A bundle that no upgrade path from the head reaches.
    pub const STRANDED_BUNDLE: &str = "stranded-bundle";
    /// An empty `skips` item.
    pub const EMPTY_SKIP: &str = "empty-skip";
    /// A skipRange that does not parse.
    pub const SKIP_RANGE: &str = "skip-range";
    /// Several bundles with one version.
    pub const DUPLICATE_VERSION: &str = "duplicate-version";
    /// A broken `olm.deprecations` blob.
    pub const DEPRECATION: &str = "deprecation";
}

/// Where a finding points: `package p / channel c / bundle b`.
pub fn object_path(package: &str, channel: Option<&str>, bundle: Option<&str>) -> String {
    let mut s = format!("package {package}");
    if let Some(c) = channel {
        s.push_str(&format!(" / channel {c}"));
    }
    if let Some(b) = bundle {
        s.push_str(&format!(" / bundle {b}"));
    }
    s
}

struct Ctx<'a> {
    report: Report,
    origins: Option<&'a Origins>,
}

impl Ctx<'_> {
    fn add(&mut self, f: Finding, file: Option<&String>) {
        let f = match file {
            Some(file) => f.file(file.clone()),
            None => f,
        };
        self.report.push(f);
    }
    fn package_file(&self, i: usize) -> Option<&String> {
        self.origins.and_then(|o| o.packages.get(i))
    }
    fn channel_file(&self, i: usize) -> Option<&String> {
        self.origins.and_then(|o| o.channels.get(i))
    }
    fn bundle_file(&self, i: usize) -> Option<&String> {
        self.origins.and_then(|o| o.bundles.get(i))
    }
    fn deprecation_file(&self, i: usize) -> Option<&String> {
        self.origins.and_then(|o| o.deprecations.get(i))
    }
}

/// Checks a package name like Kubernetes' `IsDNS1123Label`; returns opm's error list text.
pub fn dns1123_label_errors(name: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if name.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    let b = name.as_bytes();
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let ok = !b.is_empty()
        && b.first().is_some_and(alnum)
        && b.last().is_some_and(alnum)
        && b.iter().all(|c| alnum(c) || *c == b'-');
    if !ok {
        errs.push("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_string());
    }
    errs
}

/// Checks an image pull spec like docker's `ParseNormalizedNamed`; `None` when valid.
pub fn image_pullspec_error(spec: &str) -> Option<String> {
    if spec.is_empty() {
        return None;
    }
    match spec.parse::<oci_spec::distribution::Reference>() {
        Ok(_) => None,
        Err(e) => {
            // docker/reference says "repository name must be lowercase" when the lowercase
            // spelling would have parsed; keep that more helpful wording.
            let lower_ok = spec
                .to_lowercase()
                .parse::<oci_spec::distribution::Reference>()
                .is_ok();
            Some(if lower_ok {
                "repository name must be lowercase".to_string()
            } else {
                e.to_string()
            })
        }
    }
}

/// A field check: name, predicate, what the value must be.
type FieldCheck<'a> = (&'a str, fn(&serde_json::Value) -> bool, &'a str);

/// Known property types whose values opm parses (and rejects when malformed).
fn check_property(p: &crate::declcfg::Property) -> Result<(), String> {
    use serde_json::Value;
    let expect_obj = |fields: &[FieldCheck<'_>]| -> Result<(), String> {
        let Some(obj) = p.value.as_object() else {
            return Err(format!(
                "parse property[{}] of type {:?}: json: cannot unmarshal {} into Go value",
                0,
                p.type_,
                json_kind(&p.value)
            ));
        };
        for (name, check, want) in fields {
            if let Some(v) = obj.get(*name)
                && !check(v)
            {
                return Err(format!(
                    "parse property of type {:?}: field {name:?} must be {want}, found {}",
                    p.type_,
                    json_kind(v)
                ));
            }
        }
        Ok(())
    };
    let is_str: fn(&Value) -> bool = |v| v.is_string();
    match p.type_.as_str() {
        property::PACKAGE => expect_obj(&[
            ("packageName", is_str, "a string"),
            ("version", is_str, "a string"),
        ]),
        property::PACKAGE_REQUIRED => expect_obj(&[
            ("packageName", is_str, "a string"),
            ("versionRange", is_str, "a string"),
        ]),
        property::GVK | property::GVK_REQUIRED => expect_obj(&[
            ("group", is_str, "a string"),
            ("kind", is_str, "a string"),
            ("version", is_str, "a string"),
        ]),
        property::BUNDLE_OBJECT => {
            expect_obj(&[("ref", is_str, "a string"), ("data", is_str, "a string")])?;
            if let Some(data) = property::bundle_object_data(&p.value) {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .map(|_| ())
                    .map_err(|e| {
                        format!(
                            "parse property of type {:?}: illegal base64 data: {e}",
                            p.type_
                        )
                    })
            } else if p.value.get("ref").is_none() {
                Err(format!(
                    "parse property of type {:?}: one of \"data\" or \"ref\" must be set",
                    p.type_
                ))
            } else {
                Ok(())
            }
        }
        property::CSV_METADATA => expect_obj(&[]),
        _ => Ok(()),
    }
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "bool",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

/// The `olm.package` version of a bundle, if it has exactly one that parses.
pub fn bundle_version(b: &Bundle) -> Option<semver::Version> {
    let mut pkgs = property::packages(&b.properties).into_iter();
    match (pkgs.next(), pkgs.next()) {
        (Some(Ok(p)), None) => semver::Version::parse(&p.version).ok(),
        _ => None,
    }
}

/// Validates a catalog. `origins` (from [`crate::declcfg::load::load_dir_with_files`]) adds
/// file names to the findings.
pub fn validate(cfg: &DeclarativeConfig, origins: Option<&Origins>) -> Report {
    let mut cx = Ctx {
        report: Report::new(),
        origins,
    };

    // --- packages
    let mut packages: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, p) in cfg.packages.iter().enumerate() {
        let file = cx.package_file(i).cloned();
        if p.name.is_empty() {
            cx.add(
                Finding::error(rules::PACKAGE_NAME, "config contains package with no name")
                    .path(format!("{SCHEMA_PACKAGE} blob #{i}")),
                file.as_ref(),
            );
            continue;
        }
        if packages.contains_key(p.name.as_str()) {
            cx.add(
                Finding::error(
                    rules::DUPLICATE_PACKAGE,
                    format!("duplicate package {:?}", p.name),
                )
                .path(object_path(&p.name, None, None))
                .hint("keep exactly one olm.package blob per package"),
                file.as_ref(),
            );
            continue;
        }
        let errs = dns1123_label_errors(&p.name);
        if !errs.is_empty() {
            cx.add(
                Finding::error(
                    rules::PACKAGE_NAME,
                    format!("invalid package name {:?}: [{}]", p.name, errs.join(", ")),
                )
                .path(object_path(&p.name, None, None))
                .hint("use lowercase letters, digits and '-' only"),
                file.as_ref(),
            );
        }
        packages.insert(&p.name, i);
    }

    // --- channels
    // package -> channel name -> index of the first blob with that name
    let mut channels: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    for (i, c) in cfg.channels.iter().enumerate() {
        let file = cx.channel_file(i).cloned();
        if !packages.contains_key(c.package.as_str()) {
            cx.add(
                Finding::error(
                    rules::UNKNOWN_PACKAGE,
                    format!("unknown package {:?} for channel {:?}", c.package, c.name),
                )
                .path(object_path(&c.package, Some(&c.name), None))
                .hint("add an olm.package blob for this package or fix the channel's `package`"),
                file.as_ref(),
            );
            continue;
        }
        if c.name.is_empty() {
            cx.add(
                Finding::error(
                    rules::CHANNEL_NAME,
                    format!("package {:?} contains channel with no name", c.package),
                )
                .path(object_path(&c.package, None, None)),
                file.as_ref(),
            );
            continue;
        }
        let pkg_channels = channels.entry(&c.package).or_default();
        if pkg_channels.contains_key(c.name.as_str()) {
            cx.add(
                Finding::error(
                    rules::DUPLICATE_CHANNEL,
                    format!("package {:?} has duplicate channel {:?}", c.package, c.name),
                )
                .path(object_path(&c.package, Some(&c.name), None))
                .hint("merge the entries of both olm.channel blobs into one"),
                file.as_ref(),
            );
            continue;
        }
        pkg_channels.insert(&c.name, i);
        let mut seen = HashSet::new();
        for e in &c.entries {
            if !seen.insert(e.name.as_str()) {
                cx.add(
                    Finding::error(
                        rules::DUPLICATE_ENTRY,
                        format!(
                            "invalid package {:?}, channel {:?}: duplicate entry {:?}",
                            c.package, c.name, e.name
                        ),
                    )
                    .path(object_path(
                        &c.package,
                        Some(&c.name),
                        Some(&e.name),
                    )),
                    file.as_ref(),
                );
            }
        }
    }
    // entries defined by (the first blob of) each channel
    let mut entries_of: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (pkg, chs) in &channels {
        let set = entries_of.entry(pkg).or_default();
        for &ci in chs.values() {
            if let Some(c) = cfg.channels.get(ci) {
                set.extend(c.entries.iter().map(|e| e.name.as_str()));
            }
        }
    }

    // --- bundles
    let mut bundles: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    let mut versions: HashMap<(usize, usize), semver::Version> = HashMap::new();
    let mut unmatched_entries = entries_of.clone();
    for (i, b) in cfg.bundles.iter().enumerate() {
        let file = cx.bundle_file(i).cloned();
        let path = object_path(&b.package, None, Some(&b.name));
        if b.package.is_empty() {
            cx.add(
                Finding::error(
                    rules::BUNDLE_PACKAGE,
                    format!("package name must be set for bundle {:?}", b.name),
                )
                .path(path),
                file.as_ref(),
            );
            continue;
        }
        if !packages.contains_key(b.package.as_str()) {
            cx.add(
                Finding::error(
                    rules::UNKNOWN_PACKAGE,
                    format!("unknown package {:?} for bundle {:?}", b.package, b.name),
                )
                .path(path),
                file.as_ref(),
            );
            continue;
        }
        let pkg_bundles = bundles.entry(&b.package).or_default();
        if pkg_bundles.contains_key(b.name.as_str()) {
            cx.add(
                Finding::error(
                    rules::DUPLICATE_BUNDLE,
                    format!("package {:?} has duplicate bundle {:?}", b.package, b.name),
                )
                .path(path),
                file.as_ref(),
            );
            continue;
        }
        pkg_bundles.insert(&b.name, i);

        let mut props_ok = true;
        for p in &b.properties {
            if let Err(e) = check_property(p) {
                props_ok = false;
                cx.add(
                    Finding::error(
                        rules::BUNDLE_PROPERTIES,
                        format!("parse properties for bundle {:?}: {e}", b.name),
                    )
                    .path(path.clone()),
                    file.as_ref(),
                );
            }
        }
        let pkg_props: Vec<_> = property::packages(&b.properties);
        let mut version = None;
        if props_ok {
            if pkg_props.len() != 1 {
                cx.add(
                    Finding::error(
                        rules::PACKAGE_PROPERTY,
                        format!(
                            "package {:?} bundle {:?} must have exactly 1 {:?} property, found {}",
                            b.package,
                            b.name,
                            property::PACKAGE,
                            pkg_props.len()
                        ),
                    )
                    .path(path.clone())
                    .hint(format!(
                        "add `{{type: olm.package, value: {{packageName: {}, version: <semver>}}}}` to the bundle's properties",
                        b.package
                    )),
                    file.as_ref(),
                );
            } else if let Some(Ok(pp)) = pkg_props.first() {
                if pp.package_name != b.package {
                    cx.add(
                        Finding::error(
                            rules::PACKAGE_PROPERTY,
                            format!(
                                "package {:?} does not match {:?} property {:?}",
                                b.package,
                                property::PACKAGE,
                                pp.package_name
                            ),
                        )
                        .path(path.clone()),
                        file.as_ref(),
                    );
                }
                match semver::Version::parse(&pp.version) {
                    Ok(v) => version = Some(v),
                    Err(e) => cx.add(
                        Finding::error(
                            rules::BUNDLE_VERSION,
                            format!(
                                "error parsing bundle {:?} version {:?}: {e}",
                                b.name, pp.version
                            ),
                        )
                        .path(path.clone())
                        .hint("versions are semver without a leading `v`, e.g. 1.2.3"),
                        file.as_ref(),
                    ),
                }
            }
        }
        if let Some(e) = image_pullspec_error(&b.image) {
            cx.add(
                Finding::error(
                    rules::IMAGE_PULLSPEC,
                    format!(
                        "package {:?} bundle {:?} image: invalid image pull spec {:?}: {e}",
                        b.package, b.name, b.image
                    ),
                )
                .path(path.clone()),
                file.as_ref(),
            );
        }
        for (ri, rel) in b.related_images.iter().enumerate() {
            if let Some(e) = image_pullspec_error(&rel.image) {
                cx.add(
                    Finding::error(
                        rules::IMAGE_PULLSPEC,
                        format!(
                            "package {:?} bundle {:?} relatedImages[{ri}].image: invalid image pull spec {:?}: {e}",
                            b.package, b.name, rel.image
                        ),
                    )
                    .path(path.clone()),
                    file.as_ref(),
                );
            }
        }
        let has_objects = b.omitted_objects > 0
            || b.properties
                .iter()
                .any(|p| p.type_ == property::BUNDLE_OBJECT);
        if b.image.is_empty() && !has_objects {
            cx.add(
                Finding::error(
                    rules::BUNDLE_IMAGE,
                    format!("invalid bundle {:?}: bundle image must be set", b.name),
                )
                .path(path.clone()),
                file.as_ref(),
            );
        }
        if let Some(set) = unmatched_entries.get_mut(b.package.as_str()) {
            set.remove(b.name.as_str());
        }
        let in_channel = entries_of
            .get(b.package.as_str())
            .is_some_and(|s| s.contains(b.name.as_str()));
        if !in_channel {
            cx.add(
                Finding::error(
                    rules::BUNDLE_NOT_IN_CHANNEL,
                    format!(
                        "package {:?}, bundle {:?} not found in any channel entries",
                        b.package, b.name
                    ),
                )
                .path(path.clone())
                .hint("add the bundle to a channel's entries or remove the olm.bundle blob"),
                file.as_ref(),
            );
        }
        if let Some(v) = version {
            let pi = packages.get(b.package.as_str()).copied().unwrap_or(0);
            versions.insert((pi, i), v);
        }
    }
    for (pkg, missing) in &unmatched_entries {
        if !missing.is_empty() {
            let list: Vec<&str> = missing.iter().copied().collect();
            let file = packages
                .get(pkg)
                .and_then(|&pi| cx.package_file(pi))
                .cloned();
            cx.add(
                Finding::error(
                    rules::ENTRY_WITHOUT_BUNDLE,
                    format!(
                        "no olm.bundle blobs found in package {pkg:?} for olm.channel entries [{}]",
                        list.join(" ")
                    ),
                )
                .path(object_path(pkg, None, None))
                .hint("render the missing bundles into the catalog or remove the entries"),
                file.as_ref(),
            );
        }
    }

    // --- deprecations
    let mut deprecated_pkgs = BTreeSet::new();
    for (i, d) in cfg.deprecations.iter().enumerate() {
        let file = cx.deprecation_file(i).cloned();
        let path = object_path(&d.package, None, None);
        let err = |cx: &mut Ctx<'_>, msg: String| {
            cx.add(
                Finding::error(rules::DEPRECATION, msg).path(path.clone()),
                file.as_ref(),
            );
        };
        if d.package.is_empty() {
            err(
                &mut cx,
                format!("package name must be set for deprecation item {i}"),
            );
            continue;
        }
        if !packages.contains_key(d.package.as_str()) {
            err(
                &mut cx,
                format!(
                    "cannot apply deprecations to an unknown package {:?}",
                    d.package
                ),
            );
            continue;
        }
        if !deprecated_pkgs.insert(d.package.as_str()) {
            err(
                &mut cx,
                format!(
                    "expected a maximum of one deprecation per package: {:?}",
                    d.package
                ),
            );
            continue;
        }
        let mut refs = HashSet::new();
        for (j, e) in d.entries.iter().enumerate() {
            let r = &e.reference;
            if r.schema.is_empty() {
                err(
                    &mut cx,
                    format!(
                        "schema must be set for deprecation entry [{j}] for package {:?}",
                        d.package
                    ),
                );
                continue;
            }
            if !refs.insert((r.schema.as_str(), r.name.as_str())) {
                err(
                    &mut cx,
                    format!(
                        "duplicate deprecation entry {{Schema:{:?}, Name:{:?}}} for package {:?}",
                        r.schema, r.name, d.package
                    ),
                );
                continue;
            }
            match r.schema.as_str() {
                SCHEMA_BUNDLE => {
                    let known = bundles
                        .get(d.package.as_str())
                        .is_some_and(|b| b.contains_key(r.name.as_str()));
                    if !known {
                        err(
                            &mut cx,
                            format!(
                                "cannot deprecate bundle {:?} for package {:?}: bundle not found",
                                r.name, d.package
                            ),
                        );
                    }
                }
                SCHEMA_CHANNEL => {
                    let known = channels
                        .get(d.package.as_str())
                        .is_some_and(|c| c.contains_key(r.name.as_str()));
                    if !known {
                        err(
                            &mut cx,
                            format!(
                                "cannot deprecate channel {:?} for package {:?}: channel not found",
                                r.name, d.package
                            ),
                        );
                    }
                }
                SCHEMA_PACKAGE => {
                    if !r.name.is_empty() {
                        err(
                            &mut cx,
                            format!(
                                "package name must be empty for deprecated package {:?} (specified {:?})",
                                d.package, r.name
                            ),
                        );
                    }
                }
                _ => err(
                    &mut cx,
                    format!(
                        "cannot deprecate object {{Schema:{:?}, Name:{:?}}} referenced by entry {j} for package {:?}: object schema unknown",
                        r.schema, r.name, d.package
                    ),
                ),
            }
            if e.message.is_empty() {
                err(
                    &mut cx,
                    format!(
                        "invalid deprecation: message must be set (entry [{j}] for package {:?})",
                        d.package
                    ),
                );
            }
        }
    }

    // --- model: packages, channels, graphs
    for (&pkg, &pi) in &packages {
        let Some(p) = cfg.packages.get(pi) else {
            continue;
        };
        let pfile = cx.package_file(pi).cloned();
        let ppath = object_path(pkg, None, None);
        let pkg_channels = channels.get(pkg);
        if p.default_channel.is_empty() {
            cx.add(
                Finding::error(
                    rules::DEFAULT_CHANNEL,
                    format!("invalid package {pkg:?}: default channel must be set"),
                )
                .path(ppath.clone())
                .hint("set `defaultChannel` in the olm.package blob"),
                pfile.as_ref(),
            );
        } else if !pkg_channels.is_some_and(|c| c.contains_key(p.default_channel.as_str())) {
            // opm synthesises an empty default channel, which then fails its channel checks.
            cx.add(
                Finding::error(
                    rules::DEFAULT_CHANNEL,
                    format!(
                        "invalid channel {:?}: channel must contain at least one bundle",
                        p.default_channel
                    ),
                )
                .path(object_path(pkg, Some(&p.default_channel), None))
                .hint(format!(
                    "package {pkg:?} references non-existent default channel {:?}: add that channel or set defaultChannel to an existing one",
                    p.default_channel
                )),
                pfile.as_ref(),
            );
        }
        if pkg_channels.is_none_or(|c| c.is_empty()) && p.default_channel.is_empty() {
            cx.add(
                Finding::error(
                    rules::PACKAGE_CHANNELS,
                    format!("invalid package {pkg:?}: package must contain at least one channel"),
                )
                .path(ppath.clone()),
                pfile.as_ref(),
            );
        }
        let pkg_bundles = bundles.get(pkg);
        if let Some(chs) = pkg_channels {
            for (&cname, &ci) in chs {
                let Some(c) = cfg.channels.get(ci) else {
                    continue;
                };
                let cfile = cx.channel_file(ci).cloned();
                let version_of = |name: &str| {
                    pkg_bundles
                        .and_then(|pb| pb.get(name))
                        .and_then(|bi| versions.get(&(pi, *bi)))
                        .cloned()
                };
                for f in check_channel_graph(pkg, c, &version_of) {
                    cx.add(f, cfile.as_ref());
                }
                for e in &c.entries {
                    let bpath = object_path(pkg, Some(cname), Some(&e.name));
                    for (k, s) in e.skips.iter().enumerate() {
                        if s.is_empty() {
                            cx.add(
                                Finding::error(
                                    rules::EMPTY_SKIP,
                                    format!("invalid bundle {:?}: skip[{k}] is empty", e.name),
                                )
                                .path(bpath.clone()),
                                cfile.as_ref(),
                            );
                        }
                    }
                    if !e.skip_range.is_empty()
                        && let Err(err) = VersionRange::parse(&e.skip_range)
                    {
                        cx.add(
                            Finding::error(
                                rules::SKIP_RANGE,
                                format!(
                                    "invalid bundle {:?}: invalid skipRange {:?}: {err}",
                                    e.name, e.skip_range
                                ),
                            )
                            .path(bpath.clone())
                            .hint("use blang/semver ranges such as '>=1.0.0 <1.2.0'"),
                            cfile.as_ref(),
                        );
                    }
                }
            }
            // unique versions across the bundles that are in channels (opm's model only holds those)
            let mut by_version: BTreeMap<String, (semver::Version, BTreeSet<&str>)> =
                BTreeMap::new();
            if let Some(pb) = pkg_bundles {
                let entries = entries_of.get(pkg);
                for (&bname, &bi) in pb {
                    if !entries.is_some_and(|e| e.contains(bname)) {
                        continue;
                    }
                    if let Some(v) = versions.get(&(pi, bi)) {
                        by_version
                            .entry(v.to_string())
                            .or_insert_with(|| (v.clone(), BTreeSet::new()))
                            .1
                            .insert(bname);
                    }
                }
            }
            let mut dups: Vec<(semver::Version, Vec<&str>)> = by_version
                .into_values()
                .filter(|(_, names)| names.len() > 1)
                .map(|(v, names)| (v, names.into_iter().collect()))
                .collect();
            dups.sort_by(|a, b| a.0.cmp_precedence(&b.0));
            if !dups.is_empty() {
                let parts: Vec<String> = dups
                    .iter()
                    .map(|(v, names)| format!("{{{v}: [{}]}}", names.join(", ")))
                    .collect();
                cx.add(
                    Finding::error(
                        rules::DUPLICATE_VERSION,
                        format!(
                            "invalid package {pkg:?}: duplicate versions found in bundles: [{}]",
                            parts.join(" ")
                        ),
                    )
                    .path(ppath.clone())
                    .hint("every bundle of a package needs its own version"),
                    pfile.as_ref(),
                );
            }
        }
    }

    cx.report.normalize();
    cx.report
}

/// The channel head(s) computed like opm: entries that no entry of the channel replaces or
/// skips. `skipRange` does not count.
pub fn channel_heads(c: &crate::declcfg::Channel) -> Vec<&str> {
    let mut incoming: HashSet<&str> = HashSet::new();
    for e in &c.entries {
        if !e.replaces.is_empty() {
            incoming.insert(&e.replaces);
        }
        incoming.extend(e.skips.iter().map(String::as_str));
    }
    let mut heads: Vec<&str> = c
        .entries
        .iter()
        .map(|e| e.name.as_str())
        .filter(|n| !incoming.contains(n))
        .collect();
    heads.sort();
    heads.dedup();
    heads
}

/// opm's `validateReplacesChain` plus the empty-channel check, as findings.
pub fn check_channel_graph(
    pkg: &str,
    c: &crate::declcfg::Channel,
    version_of: &dyn Fn(&str) -> Option<semver::Version>,
) -> Vec<Finding> {
    let path = object_path(pkg, Some(&c.name), None);
    let ctx = format!("invalid channel {:?}", c.name);
    let mut out = Vec::new();
    if c.entries.is_empty() {
        out.push(
            Finding::error(
                rules::CHANNEL_EMPTY,
                format!("{ctx}: channel must contain at least one bundle"),
            )
            .path(path),
        );
        return out;
    }
    let heads = channel_heads(c);
    let head = match heads.as_slice() {
        [] => {
            out.push(
                Finding::error(
                    rules::CHANNEL_HEAD,
                    format!("{ctx}: no channel head found in graph"),
                )
                .path(path)
                .hint("every entry is replaced or skipped by another: remove the edge that points at the newest bundle"),
            );
            return out;
        }
        [one] => *one,
        many => {
            let mut hint = String::from(
                "a channel needs exactly one entry that nothing replaces or skips (skipRange does not count)",
            );
            if let Some(h) = suggest_head_fix(c, many, version_of) {
                hint = format!("{hint}; {h}");
            }
            out.push(
                Finding::error(
                    rules::CHANNEL_HEAD,
                    format!(
                        "{ctx}: multiple channel heads found in graph: {}",
                        many.join(", ")
                    ),
                )
                .path(path)
                .hint(hint),
            );
            return out;
        }
    };
    let by_name: HashMap<&str, &crate::declcfg::ChannelEntry> =
        c.entries.iter().map(|e| (e.name.as_str(), e)).collect();
    // operator-registry `alpha/model/model.go` `Channel.validateReplacesChain`: walk the
    // replaces chain from the head, stopping before an edge into a bundle that ANY entry of the
    // channel skips; stranded are the entries neither on that chain nor skipped by any entry.
    let skipped: HashSet<&str> = c
        .entries
        .iter()
        .flat_map(|e| e.skips.iter().map(String::as_str))
        .collect();
    let mut chain: Vec<&str> = vec![head];
    let mut on_chain: HashSet<&str> = HashSet::from([head]);
    let mut cur = by_name.get(head).copied();
    while let Some(e) = cur {
        let next = e.replaces.as_str();
        if skipped.contains(next) {
            break;
        }
        if on_chain.contains(next) {
            let start = chain.iter().position(|n| *n == next).unwrap_or(0);
            let mut cycle: Vec<&str> = chain[start..].to_vec();
            cycle.push(next);
            out.push(
                Finding::error(
                    rules::REPLACES_CYCLE,
                    format!(
                        "{ctx}: detected cycle in replaces chain of upgrade graph: {}",
                        cycle.join(" -> ")
                    ),
                )
                .path(path)
                .hint("a bundle must replace an older one; break the loop"),
            );
            return out;
        }
        on_chain.insert(next);
        chain.push(next);
        cur = by_name.get(next).copied();
    }
    let mut stranded: Vec<&str> = c
        .entries
        .iter()
        .map(|e| e.name.as_str())
        .filter(|n| !on_chain.contains(n) && !skipped.contains(n))
        .collect();
    stranded.sort();
    stranded.dedup();
    if !stranded.is_empty() {
        out.push(
            Finding::error(
                rules::STRANDED_BUNDLE,
                format!(
                    "{ctx}: channel contains one or more stranded bundles: {}",
                    stranded.join(", ")
                ),
            )
            .path(path)
            .hint("an installed stranded bundle can never upgrade: make the replaces chain from the head pass through it, or skip it"),
        );
    }
    out
}

/// For several heads, names the edge that would join them: the newest head should replace
/// (or skip) each other head. When its skipRange already covers one, says so: that is the
/// classic "skipRange-only" mistake (opm and OLM v0 compute heads without skipRange).
fn suggest_head_fix(
    c: &crate::declcfg::Channel,
    heads: &[&str],
    version_of: &dyn Fn(&str) -> Option<semver::Version>,
) -> Option<String> {
    let newest = heads
        .iter()
        .filter_map(|h| version_of(h).map(|v| (*h, v)))
        .max_by(|a, b| a.1.cmp_precedence(&b.1))?;
    let entry = c.entries.iter().find(|e| e.name == newest.0)?;
    let range = VersionRange::parse(&entry.skip_range).ok();
    let mut parts = Vec::new();
    for h in heads.iter().filter(|h| **h != newest.0) {
        let covered = range
            .as_ref()
            .zip(version_of(h))
            .is_some_and(|(r, v)| r.contains(&v));
        if covered {
            parts.push(format!(
                "{} covers {h} only by skipRange: add `skips: [{h}]` or `replaces: {h}` to {}",
                newest.0, newest.0
            ));
        } else {
            parts.push(format!(
                "add `replaces: {h}` (or `skips: [{h}]`) to {}",
                newest.0
            ));
        }
    }
    Some(parts.join("; "))
}
