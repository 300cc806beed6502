//! File-Based Catalogs: model, loader, writer, opm-compatible validation, templates, upgrade graphs and explain
