"""The embedded default: a local mirror of a synthetic torch, served and bisected offline."""
