"""The shared-memory transport between the ranks of one host, and the state it owns per adapter:

- shared_memory: a group's window of slots (rounds), made and kept per adapter and group
- mailbox: the window's point-to-point channels
- issue_order: the thread that runs a window's asynchronous collectives in issue order
- backoff, liveness: how a rank waits for its peers, and how it learns that one is gone
- scratch: the buffers the algorithms reuse from call to call, one pool per adapter
"""
