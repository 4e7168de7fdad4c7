// Package devqueue holds the interfaces ddp.OnDevice needs of a device:
// memory, in-order asynchronous queues (CUDA streams) and markers (CUDA
// events). They live in a package of their own so that device packages
// (goddp/cuda behind its build tag) can implement them without importing
// ddp; ddp re-exports every type under the same name (ddp.Device,
// ddp.Queue, ...), and programs use those.
package devqueue
