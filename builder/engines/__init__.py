"""Container engines behind one small interface (base.Engine): podman through podman-py, Docker
(or podman's Docker-compatible API) through the docker SDK."""
