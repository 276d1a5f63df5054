"""Container engines behind one small interface (base.Engine), both small subclasses of one
engine base (sdk.SdkEngine): podman through podman-py, Docker (or podman's Docker-compatible
API) through the docker SDK."""
