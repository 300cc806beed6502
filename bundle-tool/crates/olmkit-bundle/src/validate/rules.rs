//! Every bundle rule: its id, suite, the upstream function(s) it mirrors and what it checks.
//!
//! One constant per rule, so checks name a rule by constant ([`olmkit_core::Rule`]); [`RULES`]
//! lists them for `--help`, documentation and the meta-test `tests/it/validate_rules.rs`,
//! which fails until a test produces each id.

use olmkit_core::{Rule, Upstream};

/// `yaml-syntax` (suite `default`).
pub const YAML_SYNTAX: Rule = Rule::new(
    "yaml-syntax",
    "default",
    Upstream::Stricter,
    "(warning) YAML that only Go's lenient decoder reads (duplicate keys, under-indented quoted scalars), or a metadata file upstream ignores",
);

/// `bundle-annotations` (suite `default`).
pub const BUNDLE_ANNOTATIONS: Rule = Rule::new(
    "bundle-annotations",
    "default",
    Upstream::Mirrors("operator-registry validateAnnotations"),
    "metadata/annotations.yaml exists with the mediatype, package and channels keys (operator-registry validateAnnotations: errors); other values and empty entries (warnings)",
);

/// `bundle-default-channel` (suite `default`).
pub const BUNDLE_DEFAULT_CHANNEL: Rule = Rule::new(
    "bundle-default-channel",
    "default",
    Upstream::Stricter,
    "(warning) the default channel is one of the bundle's channels",
);

/// `bundle-size` (suite `default`).
pub const BUNDLE_SIZE: Rule = Rule::new(
    "bundle-size",
    "default",
    Upstream::Mirrors("operator-framework/api validateBundleSize"),
    "the manifests, each gzip-compressed and base64-encoded, sum to at most 1 MiB (operator-framework/api validateBundleSize; warning above 85%)",
);

/// `dockerfile-labels` (suite `default`).
pub const DOCKERFILE_LABELS: Rule = Rule::new(
    "dockerfile-labels",
    "default",
    Upstream::Stricter,
    "(warning) bundle.Dockerfile LABELs equal the annotations",
);

/// `dockerfile-copy` (suite `default`).
pub const DOCKERFILE_COPY: Rule = Rule::new(
    "dockerfile-copy",
    "default",
    Upstream::Stricter,
    "(warning) bundle.Dockerfile COPY sources name something in the bundle, resolved against a build context above it",
);

/// `manifest-kind` (suite `default`).
pub const MANIFEST_KIND: Rule = Rule::new(
    "manifest-kind",
    "default",
    Upstream::Mirrors("operator-sdk ValidateBundleContent, operator-framework/api loadBundle"),
    "every manifest is a kind OLM installs from a registry+v1 bundle, and manifests/ holds no folder or hidden file (operator-sdk ValidateBundleContent, operator-framework/api loadBundle)",
);

/// `manifest-metadata` (suite `default`).
pub const MANIFEST_METADATA: Rule = Rule::new(
    "manifest-metadata",
    "default",
    Upstream::Mirrors("operator-sdk ValidateBundleContent"),
    "every manifest has a kind and a metadata.name (errors, as operator-sdk); apiVersion, name syntax per kind and duplicates (warnings)",
);

/// `manifest-namespace` (suite `default`).
pub const MANIFEST_NAMESPACE: Rule = Rule::new(
    "manifest-namespace",
    "default",
    Upstream::Stricter,
    "namespaced manifests carry no metadata.namespace (OLM installs into the operator's namespace)",
);

/// `manifest-size` (suite `default`).
pub const MANIFEST_SIZE: Rule = Rule::new(
    "manifest-size",
    "default",
    Upstream::Stricter,
    "(warning) no single object exceeds 1 MiB as JSON",
);

/// `csv-missing` (suite `default`).
pub const CSV_MISSING: Rule = Rule::new(
    "csv-missing",
    "default",
    Upstream::Mirrors("operator-framework/api loadBundle"),
    "the bundle has exactly one ClusterServiceVersion (operator-framework/api loadBundle)",
);

/// `csv-schema` (suite `default`).
pub const CSV_SCHEMA: Rule = Rule::new(
    "csv-schema",
    "default",
    Upstream::Stricter,
    "(warning) the CSV, as Go decodes it, validates against OLM's ClusterServiceVersion CRD schema",
);

/// `csv-name` (suite `default`).
pub const CSV_NAME: Rule = Rule::new(
    "csv-name",
    "default",
    Upstream::Mirrors("operator-framework/api parseCSVNameFormat"),
    "metadata.name is a DNS-1123 subdomain and a label value (operator-framework/api parseCSVNameFormat: error); shaped <operator>.v<semver> (warning)",
);

/// `csv-version` (suite `default`).
pub const CSV_VERSION: Rule = Rule::new(
    "csv-version",
    "default",
    Upstream::Mirrors(
        "Go decoding of v1alpha1.ClusterServiceVersion (operator-framework/api bundle loader)",
    ),
    "spec.version is semver (Go decoding: error), set and matching the name (warnings)",
);

/// `csv-package` (suite `default`).
pub const CSV_PACKAGE: Rule = Rule::new(
    "csv-package",
    "default",
    Upstream::Stricter,
    "(warning) the CSV name starts with the package name",
);

/// `csv-replaces` (suite `default`).
pub const CSV_REPLACES: Rule = Rule::new(
    "csv-replaces",
    "default",
    Upstream::Mirrors("operator-framework/api parseCSVNameFormat"),
    "spec.replaces is a valid CSV name (operator-framework/api parseCSVNameFormat: error); shape, self-reference and operator name (warnings)",
);

/// `csv-skips` (suite `default`).
pub const CSV_SKIPS: Rule = Rule::new(
    "csv-skips",
    "default",
    Upstream::Stricter,
    "(warning) spec.skips entries are CSV names sharing this CSV's operator name",
);

/// `csv-skip-range` (suite `default`).
pub const CSV_SKIP_RANGE: Rule = Rule::new(
    "csv-skip-range",
    "default",
    Upstream::Stricter,
    "(warning) olm.skipRange parses as an OLM (blang) semver range",
);

/// `csv-annotations` (suite `default`).
pub const CSV_ANNOTATIONS: Rule = Rule::new(
    "csv-annotations",
    "default",
    Upstream::Mirrors("operator-framework/api ValidateAnnotationNames"),
    "case-sensitive OLM annotation keys are spelled right (operator-framework/api ValidateAnnotationNames: error); olm.properties is not used (warning)",
);

/// `csv-min-kube-version` (suite `default`).
pub const CSV_MIN_KUBE_VERSION: Rule = Rule::new(
    "csv-min-kube-version",
    "default",
    Upstream::Mirrors("operator-framework/api validateMinKubeVersion"),
    "spec.minKubeVersion parses as strict semver (operator-framework/api validateMinKubeVersion: error; a warning when empty)",
);

/// `csv-install-modes` (suite `default`).
pub const CSV_INSTALL_MODES: Rule = Rule::new(
    "csv-install-modes",
    "default",
    Upstream::Mirrors("operator-framework/api validateInstallModes"),
    "install modes exist, one is supported, only AllNamespaces with conversion CRDs (operator-framework/api validateInstallModes: errors); duplicates and unknown types (warnings)",
);

/// `csv-examples` (suite `default`).
pub const CSV_EXAMPLES: Rule = Rule::new(
    "csv-examples",
    "default",
    Upstream::Mirrors("operator-framework/api validateExamplesAnnotations"),
    "alm-examples is JSON listing provided APIs only (operator-framework/api validateExamplesAnnotations: errors); owned APIs have examples (warning)",
);

/// `csv-required` (suite `default`).
pub const CSV_REQUIRED: Rule = Rule::new(
    "csv-required",
    "default",
    Upstream::Mirrors("operator-framework/api checkEmptyFields, validateVersionKind"),
    "fields without omitempty are set: displayName, install strategy, deployments (operator-framework/api checkEmptyFields: errors); the strategy is deployment (warning)",
);

/// `csv-owned-crds` (suite `default`).
pub const CSV_OWNED_CRDS: Rule = Rule::new(
    "csv-owned-crds",
    "default",
    Upstream::Mirrors("operator-framework/api validateOwnedCRDs"),
    "owned CRDs are shipped and shipped CRDs are owned (operator-framework/api validateOwnedCRDs: errors); listed twice, served versions not listed (warnings)",
);

/// `csv-webhooks` (suite `default`).
pub const CSV_WEBHOOKS: Rule = Rule::new(
    "csv-webhooks",
    "default",
    Upstream::Stricter,
    "(warning) webhookdefinitions reference install deployments, do not intercept OLM's own resources, and convert owned CRDs",
);

/// `crd-schema` (suite `default`).
pub const CRD_SCHEMA: Rule = Rule::new(
    "crd-schema",
    "default",
    Upstream::Stricter,
    "(warning) CRDs, as Go decodes them, validate as apiextensions.k8s.io/v1 objects",
);

/// `crd-versions` (suite `default`).
pub const CRD_VERSIONS: Rule = Rule::new(
    "crd-versions",
    "default",
    Upstream::Mirrors(
        "apiextensions ValidateCustomResourceDefinition via operator-framework/api validateInternalCRD",
    ),
    "name <plural>.<group>, one storage version, unique versions, conversionReviewVersions, preserveUnknownFields not true, apiextensions v1/v1beta1 only (apiextensions ValidateCustomResourceDefinition via operator-framework/api validateInternalCRD: errors)",
);

/// `crd-conversion` (suite `default`).
pub const CRD_CONVERSION: Rule = Rule::new(
    "crd-conversion",
    "default",
    Upstream::Stricter,
    "(warning) CRDs with a conversion webhook are wired to a ConversionWebhook definition",
);

/// `install-deployments` (suite `default`).
pub const INSTALL_DEPLOYMENTS: Rule = Rule::new(
    "install-deployments",
    "default",
    Upstream::Mirrors("Go decoding of the DeploymentSpecs (operator-framework/api bundle loader)"),
    "(warning) install deployments exist, are unique, valid apps/v1 DeploymentSpecs (as Go decodes them) with matching selectors",
);

/// `install-service-accounts` (suite `default`).
pub const INSTALL_SERVICE_ACCOUNTS: Rule = Rule::new(
    "install-service-accounts",
    "default",
    Upstream::Mirrors("operator-framework/api validateServiceAccounts"),
    "no bundled ServiceAccount is named like a deployment's serviceAccountName (operator-framework/api validateServiceAccounts: error); every deployment's account is created by OLM or shipped (warning)",
);

/// `install-permissions` (suite `default`).
pub const INSTALL_PERMISSIONS: Rule = Rule::new(
    "install-permissions",
    "default",
    Upstream::Stricter,
    "(warning) permissions are for service accounts some deployment uses",
);

/// `kube-schema` (suite `default`).
pub const KUBE_SCHEMA: Rule = Rule::new(
    "kube-schema",
    "default",
    Upstream::Stricter,
    "(warning) Services, ConfigMaps, RBAC and webhook configurations, as Go decodes them, validate against Kubernetes schemas",
);

/// `deprecated-api` (suite `default`).
pub const DEPRECATED_API: Rule = Rule::new(
    "deprecated-api",
    "default",
    Upstream::Stricter,
    "(warning) no manifest uses an API removed from Kubernetes (an error with suite=strict when minKubeVersion is past the removal)",
);

/// `operatorhub` (suite `operatorhub`).
pub const OPERATORHUB: Rule = Rule::new(
    "operatorhub",
    "operatorhub",
    Upstream::Mirrors(
        "operator-framework/api validateHubCSVSpec, checkCategories, checkCapabilities",
    ),
    "OperatorHub.io criteria: provider, maintainers, links, capabilities, categories, version, icon, minKubeVersion (operator-framework/api validateHubCSVSpec, checkCategories, checkCapabilities); naming and channels (warnings)",
);

/// `removed-api` (suite `operatorhub`).
pub const REMOVED_API: Rule = Rule::new(
    "removed-api",
    "operatorhub",
    Upstream::Mirrors("operator-framework/api validateDeprecatedAPIS"),
    "APIs removed in Kubernetes 1.22/1.25/1.26 (operator-framework/api validateDeprecatedAPIS): errors when k8s-version or minKubeVersion is at or past the removal, warnings otherwise and for 1.25 permission rules",
);

/// `good-practices` (suite `good-practices`).
pub const GOOD_PRACTICES: Rule = Rule::new(
    "good-practices",
    "good-practices",
    Upstream::Mirrors("operator-framework/api GoodPracticesValidator"),
    "resource requests, channel naming, CRD descriptions",
);

/// `crd-upgrade` (suite `previous`).
pub const CRD_UPGRADE: Rule = Rule::new(
    "crd-upgrade",
    "previous",
    Upstream::Mirrors("operator-controller crdupgradesafety"),
    "CRD upgrade safety: what OLM v1's CRD upgrade safety preflight refuses (operator-controller crdupgradesafety NoScopeChange, NoStoredVersionRemoved, NoExistingFieldRemoved and the per-field Enum, Required, Maximum/Minimum and length/item/property bounds, Default, Type, pattern, nullable and unhandled changes: errors); served versions kept (error); a CRD no longer shipped (warning)",
);

/// `upgrade-edge` (suite `previous`).
pub const UPGRADE_EDGE: Rule = Rule::new(
    "upgrade-edge",
    "previous",
    Upstream::Stricter,
    "the new CSV replaces, skips or skipRanges the previous one",
);

/// `olmv1-render` (suite `olm-v1`).
pub const OLMV1_RENDER: Rule = Rule::new(
    "olmv1-render",
    "olm-v1",
    Upstream::Mirrors("opm render (registry+v1 conversion)"),
    "the bundle converts to the FBC properties OLM v1 reads (opm render's registry+v1 conversion)",
);

/// `olmv1-package` (suite `olm-v1`).
pub const OLMV1_PACKAGE: Rule = Rule::new(
    "olmv1-package",
    "olm-v1",
    Upstream::Mirrors("operator-controller CheckPackageNameNotEmpty"),
    "the bundle names its package (operator-controller CheckPackageNameNotEmpty)",
);

/// `olmv1-install-modes` (suite `olm-v1`).
pub const OLMV1_INSTALL_MODES: Rule = Rule::new(
    "olmv1-install-modes",
    "olm-v1",
    Upstream::Mirrors("operator-controller registryv1 install mode conversion"),
    "AllNamespaces is supported (error without Own/SingleNamespace either; warning when OLM v1 needs a watchNamespace configuration)",
);

/// `olmv1-dependencies` (suite `olm-v1`).
pub const OLMV1_DEPENDENCIES: Rule = Rule::new(
    "olmv1-dependencies",
    "olm-v1",
    Upstream::Mirrors("operator-controller (OLM v1 resolves no dependencies)"),
    "no dependencies: olm.gvk.required, olm.package.required, olm.constraint properties, required CRDs and APIServices (OLM v1 does not resolve them)",
);

/// `olmv1-apiservices` (suite `olm-v1`).
pub const OLMV1_APISERVICES: Rule = Rule::new(
    "olmv1-apiservices",
    "olm-v1",
    Upstream::Mirrors(
        "operator-controller registryv1 conversion (apiServiceDefintions are not supported)",
    ),
    "the CSV owns no APIService definitions (operator-controller: \"apiServiceDefintions are not supported\")",
);

/// `olmv1-operator-conditions` (suite `olm-v1`).
pub const OLMV1_OPERATOR_CONDITIONS: Rule = Rule::new(
    "olmv1-operator-conditions",
    "olm-v1",
    Upstream::Stricter,
    "(warning) the operator does not use the OperatorConditions API, which OLM v1 does not provide",
);

/// `olmv1-deployments` (suite `olm-v1`).
pub const OLMV1_DEPLOYMENTS: Rule = Rule::new(
    "olmv1-deployments",
    "olm-v1",
    Upstream::Mirrors(
        "operator-controller CheckDeploymentSpecUniqueness, CheckDeploymentNameIsDNS1123SubDomain",
    ),
    "install deployment names are unique DNS-1123 subdomains (operator-controller CheckDeploymentSpecUniqueness, CheckDeploymentNameIsDNS1123SubDomain)",
);

/// `olmv1-crds` (suite `olm-v1`).
pub const OLMV1_CRDS: Rule = Rule::new(
    "olmv1-crds",
    "olm-v1",
    Upstream::Mirrors("operator-controller CheckCRDResourceUniqueness, CheckOwnedCRDExistence"),
    "CRD names are unique and owned CRDs are shipped (operator-controller CheckCRDResourceUniqueness, CheckOwnedCRDExistence)",
);

/// `olmv1-unsupported-object` (suite `olm-v1`).
pub const OLMV1_UNSUPPORTED_OBJECT: Rule = Rule::new(
    "olmv1-unsupported-object",
    "olm-v1",
    Upstream::Mirrors("operator-controller CheckObjectSupport"),
    "every manifest is a kind OLM v1 installs (operator-controller CheckObjectSupport)",
);

/// `olmv1-webhooks` (suite `olm-v1`).
pub const OLMV1_WEBHOOKS: Rule = Rule::new(
    "olmv1-webhooks",
    "olm-v1",
    Upstream::Mirrors("operator-controller CheckWebhook*, CheckConversionWebhook*"),
    "webhooks need a certificate provider (warning); unique DNS-1123 names, existing deployments, conversion webhooks with AllNamespaces only and owned, unshared CRDs, no forbidden rules (operator-controller CheckWebhook*, CheckConversionWebhook*: errors)",
);

/// Every rule, in the order `--help` and the documentation list them.
pub const RULES: &[&Rule] = &[
    &YAML_SYNTAX,
    &BUNDLE_ANNOTATIONS,
    &BUNDLE_DEFAULT_CHANNEL,
    &BUNDLE_SIZE,
    &DOCKERFILE_LABELS,
    &DOCKERFILE_COPY,
    &MANIFEST_KIND,
    &MANIFEST_METADATA,
    &MANIFEST_NAMESPACE,
    &MANIFEST_SIZE,
    &CSV_MISSING,
    &CSV_SCHEMA,
    &CSV_NAME,
    &CSV_VERSION,
    &CSV_PACKAGE,
    &CSV_REPLACES,
    &CSV_SKIPS,
    &CSV_SKIP_RANGE,
    &CSV_ANNOTATIONS,
    &CSV_MIN_KUBE_VERSION,
    &CSV_INSTALL_MODES,
    &CSV_EXAMPLES,
    &CSV_REQUIRED,
    &CSV_OWNED_CRDS,
    &CSV_WEBHOOKS,
    &CRD_SCHEMA,
    &CRD_VERSIONS,
    &CRD_CONVERSION,
    &INSTALL_DEPLOYMENTS,
    &INSTALL_SERVICE_ACCOUNTS,
    &INSTALL_PERMISSIONS,
    &KUBE_SCHEMA,
    &DEPRECATED_API,
    &OPERATORHUB,
    &REMOVED_API,
    &GOOD_PRACTICES,
    &CRD_UPGRADE,
    &UPGRADE_EDGE,
    &OLMV1_RENDER,
    &OLMV1_PACKAGE,
    &OLMV1_INSTALL_MODES,
    &OLMV1_DEPENDENCIES,
    &OLMV1_APISERVICES,
    &OLMV1_OPERATOR_CONDITIONS,
    &OLMV1_DEPLOYMENTS,
    &OLMV1_CRDS,
    &OLMV1_UNSUPPORTED_OBJECT,
    &OLMV1_WEBHOOKS,
];
