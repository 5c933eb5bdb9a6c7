"""The container backend: ``ContainerSandbox`` (Podman, or Docker) around a workspace directory that a
``HostFilesystem`` serves, so files keep every host sandbox guarantee and commands run inside."""

from workspacefs.backends.container._sandbox import CONTAINER_STRATEGIES, ContainerFilesystem, ContainerSandbox
from workspacefs.backends.host import CommandBudget

__all__ = ["CONTAINER_STRATEGIES", "CommandBudget", "ContainerFilesystem", "ContainerSandbox"]
