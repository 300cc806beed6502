//! The two small grammars the catalog rules need, from their one home in `olmkit-core`:
//! Kubernetes' DNS-1123 label (package names) and docker's image reference (bundle and related
//! images). Kept behind these names so that the rules read the same as opm's checks.

/// Checks a package name like Kubernetes' `IsDNS1123Label`; returns upstream's error texts.
pub fn dns1123_label_errors(name: &str) -> Vec<String> {
    olmkit_core::k8s_name::dns1123_label_errors(name)
}

/// Checks an image pull spec like docker's `ParseNormalizedNamed` (what opm's
/// `declcfg_to_model` calls); `None` when valid. An empty spec is allowed (opm renders
/// `image: ""` for a bundle dir without an image template).
pub fn image_pullspec_error(spec: &str) -> Option<String> {
    if spec.is_empty() {
        return None;
    }
    olmkit_core::image_ref::ImageRef::parse(spec)
        .err()
        .map(|e| e.to_string())
}
