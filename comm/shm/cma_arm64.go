package shm

// shmSysProcessVMReadv is process_vm_readv(2) on linux/arm64.
const shmSysProcessVMReadv = 270
