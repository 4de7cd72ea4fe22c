"""A service's named ports: declared, filled in, handed to the agent, kept across a restart.

A server may need more than one port (an engine's admin API beside its ingress), and an
engine that calls the agent back needs a port for the agent's endpoint that stays the same
in every life. The service here is a small Python listener on its main port.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from harness.chaos.scenario import parse_scenario
from harness.chaos.services import RunningServices, ServiceSpec, _ephemeral_low, named_port_env
from harness.errors import ScenarioError

AGENT = """name = "ports"
description = "a service with named ports"

[agent]
command = "python3 agent.py"

[agent.services.engine]
command = "python3 server.py {port} {port.ingress}"
ports = ["ingress", "endpoint"]
env = {ENDPOINT_AT = "127.0.0.1:{port.endpoint}"}
%s
[[steps]]
tool = "ui_dump"
"""

LISTENER = (
    "import socket, sys, os, time\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen()\n"
    "open(sys.argv[3], 'w').write(sys.argv[2] + ' ' + os.environ['ENDPOINT_AT'])\n"
    "time.sleep(600)\n"
)


class TestDeclaration:
    def test_named_ports_reach_the_spec(self) -> None:
        """Each named port is in the spec, handed in SERVICE_NAME_PORT."""
        (spec,) = parse_scenario(AGENT % "", source="ports.toml").services
        assert spec.ports == ("ingress", "endpoint")
        assert spec.variables() == {
            "": "ENGINE_PORT",
            "ingress": "ENGINE_INGRESS_PORT",
            "endpoint": "ENGINE_ENDPOINT_PORT",
        }

    def test_a_placeholder_of_an_undeclared_port_is_refused(self) -> None:
        """{port.NAME} of a port the service does not name is refused, naming the field."""
        text = AGENT.replace('"ingress", "endpoint"', '"ingress"') % ""
        with pytest.raises(ScenarioError) as caught:
            parse_scenario(text, source="ports.toml")
        assert "unknown placeholder {port.endpoint}" in str(caught.value)
        assert "agent.services.engine.env.ENDPOINT_AT" in str(caught.value)

    def test_a_port_named_twice_or_badly_is_refused(self) -> None:
        """A port's name is a lower-case word, given once."""
        for ports, said in (('["a", "a"]', "named twice"), ('["In-gress"]', "lower-case")):
            text = (
                AGENT.replace('["ingress", "endpoint"]', ports)
                .replace(" {port.ingress}", "")
                .replace("{port.endpoint}", "{port}")
            )
            with pytest.raises(ScenarioError) as caught:
                parse_scenario(text % "", source="ports.toml")
            assert said in str(caught.value), str(caught.value)

    def test_a_named_port_variable_must_not_clash(self) -> None:
        """A named port's variable set in the agent's env too is refused."""
        text = AGENT.replace(
            'command = "python3 agent.py"',
            'command = "python3 agent.py"\nenv = {ENGINE_INGRESS_PORT = "1"}',
        )
        with pytest.raises(ScenarioError) as caught:
            parse_scenario(text % "", source="ports.toml")
        assert "ENGINE_INGRESS_PORT is also set in env" in str(caught.value)

    def test_the_variable_name(self) -> None:
        """Capitals, every other character an underscore."""
        assert named_port_env("my-db", "admin") == "MY_DB_ADMIN_PORT"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc's port range")
class TestRunning:
    def test_ports_are_filled_in_handed_and_kept_across_a_power_cut(self, tmp_path: Path) -> None:
        """Every port is filled in (command and env), handed to the agent, below the
        ephemeral range, all different, and the same after a restart."""
        (tmp_path / "server.py").write_text(LISTENER)
        said = tmp_path / "said"
        spec = ServiceSpec(
            "engine",
            f"{sys.executable} server.py {{port}} {{port.ingress}} {said}",
            str(tmp_path),
            port_env="ENGINE_PORT",
            env={"ENDPOINT_AT": "127.0.0.1:{port.endpoint}"},
            ports=("ingress", "endpoint"),
        )
        trial = tmp_path / "trial"
        trial.mkdir()
        services = RunningServices(trial, [spec])
        try:
            services.start()
            handed = services.env()
            ports = [
                int(handed[v])
                for v in ("ENGINE_PORT", "ENGINE_INGRESS_PORT", "ENGINE_ENDPOINT_PORT")
            ]
            assert len(set(ports)) == 3
            assert all(port < _ephemeral_low() for port in ports)
            assert said.read_text() == f"{ports[1]} 127.0.0.1:{ports[2]}"
            with socket.create_connection(("127.0.0.1", ports[0]), timeout=5):
                pass
            services.power_cut()
            services.start()
            assert services.env() == handed
        finally:
            services.stop()
        assert not (trial / "service-engine").exists()
