//! An in-memory Kubernetes API server stand-in for the project's end-to-end tests
