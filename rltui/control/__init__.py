"""The control socket: its server, clients, wire protocol and the remote session."""
