//! Lossless conversion between the served versions, hub-and-spoke through v1 (being built).
