package shm

// shmSysProcessVMReadv is process_vm_readv(2) on linux/amd64 (the syscall
// package's table predates it on this architecture).
const shmSysProcessVMReadv = 310
