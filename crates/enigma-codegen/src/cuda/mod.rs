//! CUDA C++ (placeholder).
