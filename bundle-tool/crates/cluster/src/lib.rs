//! Install, status, upgrade and approve of OLM Subscriptions on a cluster (OLM v0 and v1)
