"""Container engines behind a few small roles (roles.py; Engine is their union), both small
subclasses of one engine base (sdk.SdkEngine): podman through podman-py, Docker (or podman's
Docker-compatible API) through the docker SDK."""
