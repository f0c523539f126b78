"""The embedded default: a local nightly mirror of a synthetic torch, served and bisected offline."""
