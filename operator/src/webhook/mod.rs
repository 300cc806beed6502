//! HTTPS conversion webhook for `memcacheds.cache.example.com` (being built).
