//! Catalog templates: `olm.template.basic` and `olm.semver`, rendered to FBC like
//! `opm alpha render-template`.
//!
//! A template names bundles by image. Rendering an image is the caller's business (a
//! [`BundleSource`]): bundle-tool resolves images to local bundle directories or to bundles an
//! existing catalog already has, since it does not pull images here. The semver template's
//! channel generation (Y-stream heads replacing each other within a major version, skipping
//! everything older) and default-channel choice follow operator-registry's
//! `alpha/template/semver`, checked against its `TestGenerateChannels` table.

use crate::declcfg::{
    self, Blob, Bundle, Channel, ChannelEntry, DeclarativeConfig, LoadOptions, Package,
    SCHEMA_CHANNEL, SCHEMA_PACKAGE,
};
use crate::property;
use semver::Version;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use thiserror::Error;

/// Schema of the basic template.
pub const SCHEMA_BASIC: &str = "olm.template.basic";
/// Schema of the semver template.
pub const SCHEMA_SEMVER: &str = "olm.semver";

/// A template could not be read or rendered.
#[derive(Debug, Error)]
pub enum RenderTemplateError {
    /// The file is not a template this tool knows, or its fields are wrong.
    #[error("{file}: {message}")]
    Invalid {
        /// Template file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// A bundle image could not be resolved.
    #[error("{file}: bundle image {image:?}: {message}")]
    Bundle {
        /// Template file.
        file: String,
        /// The image.
        image: String,
        /// Why.
        message: String,
    },
}

/// A [`BundleSource`] could not resolve a bundle image.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ResolveBundleError {
    /// Nothing to resolve from: the user gave no bundle directory or catalog.
    #[error("not found: no bundle directory or catalog given to resolve images from")]
    NoSources,
    /// The image is not among the known bundles.
    #[error("not found among the known bundles (e.g. {})", .examples.join(", "))]
    NotFound {
        /// A few known images, to show what the source does have.
        examples: Vec<String>,
    },
}

/// Resolves a bundle image reference to its rendered `olm.bundle` blob.
pub trait BundleSource {
    /// The blob of `image`, or why there is none.
    fn bundle(&self, image: &str) -> Result<Bundle, ResolveBundleError>;
}

/// Bundles known by image (from rendered bundle directories or an existing catalog).
#[derive(Clone, Debug, Default)]
pub struct BundlesByImage {
    /// image -> blob.
    pub by_image: BTreeMap<String, Bundle>,
}

impl BundlesByImage {
    /// Adds bundles (later ones win).
    pub fn extend(&mut self, bundles: impl IntoIterator<Item = Bundle>) {
        for b in bundles {
            self.by_image.insert(b.image.clone(), b);
        }
    }
}

impl BundleSource for BundlesByImage {
    fn bundle(&self, image: &str) -> Result<Bundle, ResolveBundleError> {
        self.by_image.get(image).cloned().ok_or_else(|| {
            if self.by_image.is_empty() {
                ResolveBundleError::NoSources
            } else {
                ResolveBundleError::NotFound {
                    examples: self.by_image.keys().take(5).cloned().collect(),
                }
            }
        })
    }
}

/// The schema of a template document (`olm.template.basic`, `olm.semver`), matched
/// case-insensitively on the key like opm.
pub fn template_schema(doc: &Value) -> Option<&str> {
    doc.as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("schema"))
        .and_then(|(_, v)| v.as_str())
}

fn field<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    obj.iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
}

/// Renders a basic template: blobs pass through, `olm.bundle` entries that only name an
/// `image` are replaced by the rendered bundle.
pub fn render_basic(
    file: &str,
    doc: &Value,
    source: &dyn BundleSource,
) -> Result<DeclarativeConfig, RenderTemplateError> {
    let invalid = |message: String| RenderTemplateError::Invalid {
        file: file.to_string(),
        message,
    };
    let obj = doc
        .as_object()
        .ok_or_else(|| invalid("a template must be an object".into()))?;
    let entries = field(obj, "entries")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("olm.template.basic needs an `entries` list".into()))?;
    let mut out = DeclarativeConfig::default();
    for (i, e) in entries.iter().enumerate() {
        let blob = declcfg::load::blob_from_value(e.clone(), false, &LoadOptions::default())
            .map_err(|m| invalid(format!("entries[{i}]: {m}")))?;
        match blob {
            Blob::Bundle(b)
                if !b.image.is_empty()
                    && b.package.is_empty()
                    && b.properties.is_empty()
                    && b.related_images.is_empty() =>
            {
                let rendered =
                    source
                        .bundle(&b.image)
                        .map_err(|e| RenderTemplateError::Bundle {
                            file: file.to_string(),
                            image: b.image.clone(),
                            message: e.to_string(),
                        })?;
                out.bundles.push(rendered);
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

/// Turns a catalog into a basic template (bundles reduced to their image), like
/// `opm alpha convert-template basic`.
pub fn convert_to_basic(cfg: &DeclarativeConfig) -> Value {
    let mut entries = Vec::new();
    for b in declcfg::write::ordered_blobs(cfg) {
        match b {
            declcfg::write::BlobRef::Bundle(bundle) => entries.push(serde_json::json!({
                "schema": declcfg::SCHEMA_BUNDLE,
                "image": bundle.image,
            })),
            other => entries.push(serde_json::to_value(other).unwrap_or(Value::Null)),
        }
    }
    serde_json::json!({"schema": SCHEMA_BASIC, "entries": entries})
}

/// Channel archetypes of the semver template, least stable first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Archetype {
    /// `candidate`.
    Candidate,
    /// `fast`.
    Fast,
    /// `stable`.
    Stable,
}

impl Archetype {
    /// Channel name prefix.
    pub fn as_str(self) -> &'static str {
        match self {
            Archetype::Candidate => "candidate",
            Archetype::Fast => "fast",
            Archetype::Stable => "stable",
        }
    }
}

/// Major or minor version channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamType {
    /// `stable-v1`.
    Major,
    /// `stable-v1.2`.
    Minor,
}

/// Options of the semver template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SemverOptions {
    /// Generate `<archetype>-vX` channels.
    pub generate_major: bool,
    /// Generate `<archetype>-vX.Y` channels.
    pub generate_minor: bool,
    /// Which kind the default channel should be, when both exist.
    pub default_preference: StreamType,
}

/// A parsed `olm.semver` template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SemverTemplate {
    /// Options.
    pub options: SemverOptions,
    /// Bundle images per archetype, in file order.
    pub bundles: BTreeMap<Archetype, Vec<String>>,
}

/// Parses an `olm.semver` template like opm's `readFile` (strict: unknown fields are errors;
/// keys match case-insensitively as Go's encoding/json does).
pub fn parse_semver(file: &str, doc: &Value) -> Result<SemverTemplate, RenderTemplateError> {
    let invalid = |message: String| RenderTemplateError::Invalid {
        file: file.to_string(),
        message,
    };
    let obj = doc
        .as_object()
        .ok_or_else(|| invalid("a template must be an object".into()))?;
    let known = [
        "schema",
        "generateMajorChannels",
        "generateMinorChannels",
        "defaultChannelTypePreference",
        "candidate",
        "fast",
        "stable",
    ];
    for k in obj.keys() {
        if !known.iter().any(|f| f.eq_ignore_ascii_case(k)) {
            return Err(invalid(format!("json: unknown field {k:?}")));
        }
    }
    if template_schema(doc) != Some(SCHEMA_SEMVER) {
        return Err(invalid(format!(
            "readFile: input file has unknown schema, should be {SCHEMA_SEMVER:?}"
        )));
    }
    let options = semver_options(obj, &invalid)?;
    let mut bundles = BTreeMap::new();
    for arch in [Archetype::Candidate, Archetype::Fast, Archetype::Stable] {
        let Some(ch) = field(obj, arch.as_str()) else {
            continue;
        };
        let ch_obj = ch
            .as_object()
            .ok_or_else(|| invalid(format!("{}: expected an object", arch.as_str())))?;
        for k in ch_obj.keys() {
            if !k.eq_ignore_ascii_case("bundles") {
                return Err(invalid(format!("json: unknown field {k:?}")));
            }
        }
        bundles.insert(arch, archetype_images(ch_obj, arch, &invalid)?);
    }
    Ok(SemverTemplate { options, bundles })
}

/// The channel options of an `olm.semver` template: which channels to generate (minor ones
/// when neither is asked for, as opm does) and which kind the default channel is.
fn semver_options(
    obj: &Map<String, Value>,
    invalid: &impl Fn(String) -> RenderTemplateError,
) -> Result<SemverOptions, RenderTemplateError> {
    let flag = |name: &str| -> Result<bool, RenderTemplateError> {
        match field(obj, name) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(invalid(format!(
                "{name}: expected a boolean, found {other}"
            ))),
        }
    };
    let generate_major = flag("generateMajorChannels")?;
    let mut generate_minor = flag("generateMinorChannels")?;
    if !generate_major && !generate_minor {
        generate_minor = true;
    }
    let pref = match field(obj, "defaultChannelTypePreference") {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(invalid(format!(
                "defaultChannelTypePreference: expected a string, found {other}"
            )));
        }
    };
    let default_preference = match pref {
        "" => {
            if generate_minor {
                StreamType::Minor
            } else {
                StreamType::Major
            }
        }
        "minor" => {
            if !generate_minor {
                return Err(invalid("schema attribute mismatch: DefaultChannelTypePreference set to 'minor' doesn't make sense if not generating minor-version channels".into()));
            }
            StreamType::Minor
        }
        "major" => {
            if !generate_major {
                return Err(invalid("schema attribute mismatch: DefaultChannelTypePreference set to 'major' doesn't make sense if not generating major-version channels".into()));
            }
            StreamType::Major
        }
        other => {
            return Err(invalid(format!(
                "unknown DefaultChannelTypePreference: {other:?}\nValid values are 'major' or 'minor'"
            )));
        }
    };
    Ok(SemverOptions {
        generate_major,
        generate_minor,
        default_preference,
    })
}

/// The bundle images of one archetype (`candidate`, `fast`, `stable`), in file order.
fn archetype_images(
    ch_obj: &Map<String, Value>,
    arch: Archetype,
    invalid: &impl Fn(String) -> RenderTemplateError,
) -> Result<Vec<String>, RenderTemplateError> {
    let mut images = Vec::new();
    for (i, b) in field(ch_obj, "bundles")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let b_obj = b.as_object().ok_or_else(|| {
            invalid(format!(
                "{}.bundles[{i}]: expected an object",
                arch.as_str()
            ))
        })?;
        for k in b_obj.keys() {
            if !k.eq_ignore_ascii_case("image") {
                return Err(invalid(format!("json: unknown field {k:?}")));
            }
        }
        let img = field(b_obj, "image")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| invalid(format!("{}.bundles[{i}].image must be set", arch.as_str())))?;
        images.push(img.to_string());
    }
    Ok(images)
}

fn minor_key(v: &Version) -> (u64, u64) {
    (v.major, v.minor)
}

/// Generates the channels of one package from bundle versions per archetype, and the default
/// channel. Channels come sorted by name; entries ascend by version.
pub fn generate_channels(
    package: &str,
    input: &BTreeMap<Archetype, Vec<(String, Version)>>,
    opts: &SemverOptions,
) -> (Vec<Channel>, String) {
    let mut channels: BTreeMap<String, Vec<ChannelEntry>> = BTreeMap::new();
    // The "high-water" channel: most stable archetype, then the highest version that created
    // a channel, then the preferred stream type.
    let mut best: Option<(Archetype, Version, u8, String)> = None;
    let kind_rank = |k: StreamType| -> u8 {
        match (k == opts.default_preference, k) {
            (true, _) => 3,
            (false, StreamType::Minor) => 2,
            (false, StreamType::Major) => 1,
        }
    };
    for (&arch, bundles) in input {
        let mut sorted: Vec<&(String, Version)> = bundles.iter().collect();
        sorted.sort_by(|a, b| a.1.cmp_precedence(&b.1).then_with(|| a.0.cmp(&b.0)));
        // Edges are computed per major version stream: the last bundle of each Y-stream
        // replaces the last bundle of the previous Y-stream and skips everything older.
        let mut edges: BTreeMap<&str, ChannelEntry> = BTreeMap::new();
        let mut by_major: BTreeMap<u64, Vec<&(String, Version)>> = BTreeMap::new();
        for b in &sorted {
            by_major.entry(b.1.major).or_default().push(b);
        }
        for stream in by_major.values() {
            let mut prev_ymax: Option<&str> = None;
            for (i, (name, v)) in stream.iter().map(|b| (&b.0, &b.1)).enumerate() {
                let is_ymax = stream
                    .get(i + 1)
                    .is_none_or(|next| minor_key(&next.1) != minor_key(v));
                let mut entry = ChannelEntry {
                    name: name.clone(),
                    ..Default::default()
                };
                if is_ymax {
                    if let Some(p) = prev_ymax {
                        entry.replaces = p.to_string();
                    }
                    entry.skips = stream[..i]
                        .iter()
                        .map(|b| b.0.clone())
                        .filter(|n| Some(n.as_str()) != prev_ymax)
                        .collect();
                    prev_ymax = Some(name);
                }
                edges.insert(name, entry);
            }
        }
        for (name, v) in sorted.iter().map(|b| (&b.0, &b.1)) {
            let mut kinds = Vec::new();
            if opts.generate_major {
                kinds.push((StreamType::Major, format!("{}-v{}", arch.as_str(), v.major)));
            }
            if opts.generate_minor {
                kinds.push((
                    StreamType::Minor,
                    format!("{}-v{}.{}", arch.as_str(), v.major, v.minor),
                ));
            }
            for (kind, cname) in kinds {
                let list = channels.entry(cname.clone()).or_default();
                if list.is_empty() {
                    let candidate = (arch, v.clone(), kind_rank(kind), cname.clone());
                    let better = best.as_ref().is_none_or(|b| {
                        candidate
                            .0
                            .cmp(&b.0)
                            .then_with(|| candidate.1.cmp_precedence(&b.1))
                            .then_with(|| candidate.2.cmp(&b.2))
                            .is_gt()
                    });
                    if better {
                        best = Some(candidate);
                    }
                }
                if let Some(e) = edges.get(name.as_str()) {
                    list.push(e.clone());
                }
            }
        }
    }
    let out = channels
        .into_iter()
        .map(|(name, entries)| Channel {
            schema: SCHEMA_CHANNEL.into(),
            name,
            package: package.to_string(),
            entries,
            properties: Vec::new(),
        })
        .collect();
    (out, best.map(|b| b.3).unwrap_or_default())
}

/// Renders a semver template into a catalog for one package.
pub fn render_semver(
    file: &str,
    doc: &Value,
    source: &dyn BundleSource,
) -> Result<DeclarativeConfig, RenderTemplateError> {
    let t = parse_semver(file, doc)?;
    let invalid = |message: String| RenderTemplateError::Invalid {
        file: file.to_string(),
        message,
    };
    let mut rendered: BTreeMap<String, Bundle> = BTreeMap::new();
    let mut package = String::new();
    let mut input: BTreeMap<Archetype, Vec<(String, Version)>> = BTreeMap::new();
    for (&arch, images) in &t.bundles {
        let mut seen = std::collections::BTreeSet::new();
        let mut list = Vec::new();
        for img in images {
            let b = match rendered.get(img) {
                Some(b) => b.clone(),
                None => {
                    let b = source
                        .bundle(img)
                        .map_err(|e| RenderTemplateError::Bundle {
                            file: file.to_string(),
                            image: img.clone(),
                            message: e.to_string(),
                        })?;
                    rendered.insert(img.clone(), b.clone());
                    b
                }
            };
            let pkgs = property::packages(&b.properties);
            let pp = match pkgs.as_slice() {
                [Ok(p)] => p.clone(),
                _ => {
                    return Err(invalid(format!(
                        "bundle {:?} has multiple {:?} properties, expected exactly 1",
                        b.name,
                        property::PACKAGE
                    )));
                }
            };
            let v = Version::parse(&pp.version).map_err(|e| {
                invalid(format!(
                    "bundle {:?} has invalid version {:?}: {e}",
                    b.name, pp.version
                ))
            })?;
            if package.is_empty() {
                package = pp.package_name.clone();
            } else if pp.package_name != package {
                return Err(invalid(format!(
                    "bundle {:?} does not belong to this package: {package:?}",
                    pp.package_name
                )));
            }
            if !seen.insert(b.name.clone()) {
                return Err(invalid(format!("duplicate bundle name {:?}", b.name)));
            }
            list.push((b.name.clone(), v));
        }
        // Versions differing only by build metadata cannot be ordered.
        let mut stripped = std::collections::BTreeMap::new();
        for (_, v) in &list {
            let mut s = v.clone();
            s.build = semver::BuildMetadata::EMPTY;
            if let Some(prev) = stripped.insert(s.to_string(), v.to_string()) {
                return Err(invalid(format!(
                    "encountered bundle versions which differ only by build metadata, which cannot be ordered: bundle version {prev:?} cannot be compared to {:?}",
                    v.to_string()
                )));
            }
        }
        input.insert(arch, list);
    }
    if rendered.is_empty() {
        return Err(invalid(
            "render: no bundles specified or no bundles could be rendered".into(),
        ));
    }
    let (channels, default_channel) = generate_channels(&package, &input, &t.options);
    let mut out = DeclarativeConfig {
        packages: vec![Package {
            schema: SCHEMA_PACKAGE.into(),
            name: package,
            default_channel,
            icon: None,
            description: String::new(),
            properties: Vec::new(),
        }],
        channels,
        ..Default::default()
    };
    out.bundles = rendered.into_values().collect();
    Ok(out)
}

/// Renders any known template document.
pub fn render_template(
    file: &str,
    doc: &Value,
    source: &dyn BundleSource,
) -> Result<DeclarativeConfig, RenderTemplateError> {
    match template_schema(doc) {
        Some(SCHEMA_BASIC) => render_basic(file, doc, source),
        Some(SCHEMA_SEMVER) => render_semver(file, doc, source),
        Some(other) => Err(RenderTemplateError::Invalid {
            file: file.to_string(),
            message: format!(
                "unknown template schema {other:?} (known: {SCHEMA_BASIC}, {SCHEMA_SEMVER})"
            ),
        }),
        None => Err(RenderTemplateError::Invalid {
            file: file.to_string(),
            message: "not a catalog template: no `schema`".into(),
        }),
    }
}
