//! Typed argument binding: each kernel family declares its parameters
//! once, in a [`kernel_args!`](crate::kernel_args) struct whose fields are
//! the parameters of the family's kernels; the builders name their parameters by the struct's
//! constants (`ElementwiseArgs::X4`) and a launcher fills the struct
//! (`ElementwiseArgs { x4: buf, … }`), so no parameter name is written
//! twice. [`KernelArgs::bind`] orders the fields as a kernel's parameters
//! lie and refuses a parameter the struct does not have, or an optional
//! buffer left out that the kernel declares.
//!
//! The struct is generic over the launcher's buffer type: fields of
//! `&'a T` (the kernels hold no runtime dependency; `enigma-ops` binds
//! `&Buffer`s). Two structs bind together as a pair (the family's
//! arguments beside [`SplitArgs`](super::split::SplitArgs), the output of
//! a kernel whose K may be split), buffers of either living as long as
//! the shorter.

use enigma_ir::{Kernel, Literal};

/// What one kernel parameter is bound to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound<B> {
    Buffer(B),
    Value(Literal),
}

/// Why a parameter has no argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unbound {
    /// The arguments have no field of that name.
    NotAParameter,
    /// The field is an optional buffer the launch left out.
    NotGiven,
}

/// A kernel parameter [`KernelArgs::bind`] found no argument for.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("kernel `{kernel}`: parameter `{param}` {}", match .reason {
    Unbound::NotAParameter => format!("is not one of the arguments {args} binds"),
    Unbound::NotGiven => format!("is an optional buffer of {args} that the launch left out"),
})]
pub struct BindError {
    pub kernel: String,
    pub param: String,
    /// The arguments' type (both, for a pair).
    pub args: String,
    pub reason: Unbound,
}

/// The arguments of a family's kernels (a
/// [`kernel_args!`](crate::kernel_args) struct, or a pair of them) with
/// buffers `&'s T`.
pub trait KernelArgs<'s, T: ?Sized> {
    /// The type's name, for errors.
    fn type_name(&self) -> String;

    /// The argument for the parameter called `name`.
    fn arg(&self, name: &str) -> Result<Bound<&'s T>, Unbound>;

    /// The arguments for `kernel`'s parameters, in their order.
    fn bind(&self, kernel: &Kernel) -> Result<Vec<Bound<&'s T>>, BindError> {
        kernel
            .params
            .iter()
            .map(|p| {
                self.arg(&p.name).map_err(|reason| BindError { kernel: kernel.name.clone(), param: p.name.clone(), args: self.type_name(), reason })
            })
            .collect()
    }
}

/// `First`'s buffers may outlive `Second`'s: the pair binds as long as the
/// shorter.
impl<'s, 'f: 's, T: ?Sized + 'f, First: KernelArgs<'f, T>, Second: KernelArgs<'s, T>> KernelArgs<'s, T> for (First, Second) {
    fn type_name(&self) -> String {
        format!("{} and {}", self.0.type_name(), self.1.type_name())
    }

    fn arg(&self, name: &str) -> Result<Bound<&'s T>, Unbound> {
        match self.0.arg(name) {
            Err(Unbound::NotAParameter) => self.1.arg(name),
            found => found,
        }
    }
}

/// A by-value kernel argument.
pub trait ValueArg: Copy {
    fn literal(self) -> Literal;
}

impl ValueArg for u32 {
    fn literal(self) -> Literal {
        Literal::u32(self)
    }
}

impl ValueArg for i32 {
    fn literal(self) -> Literal {
        Literal::i32(self)
    }
}

impl ValueArg for f32 {
    fn literal(self) -> Literal {
        Literal::f32(self)
    }
}

/// Declares a family's arguments: `CONST field: kind` per parameter, where
/// the kind is `buffer`, `optional` (a buffer some launches leave out:
/// `Option<B>`) or a by-value type (`u32`, `i32`, `f32`). It makes the
/// struct (generic over the buffer type `B`, `()` by default, and bound
/// where `B` is a reference; arguments that are all values are declared
/// `pub struct Name(values)` and bind beside any buffers), a constant per
/// parameter holding its name (the field's name), `NAMES` (all of them)
/// and the [`KernelArgs`] implementation.
#[macro_export]
macro_rules! kernel_args {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* $konst:ident $field:ident : $kind:ident ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        pub struct $name<B = ()> {
            $( $(#[$fmeta])* pub $field: $crate::kernel_args!(@type $kind), )*
        }

        impl<B: Copy> Clone for $name<B> {
            fn clone(&self) -> Self {
                *self
            }
        }

        impl<B: Copy> Copy for $name<B> {}

        impl<B: ::std::fmt::Debug> ::std::fmt::Debug for $name<B> {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.debug_struct(stringify!($name))$(.field(stringify!($field), &self.$field))*.finish()
            }
        }
        $crate::kernel_args!(@names [$name] $( $konst $field $kind ),*);

        impl<'s, 'a: 's, T: ?Sized> $crate::library::args::KernelArgs<'s, T> for $name<&'a T> {
            $crate::kernel_args!(@arg [$name] $( $field $kind ),*);
        }
    };
    (
        $(#[$meta:meta])*
        pub struct $name:ident(values) {
            $( $(#[$fmeta:meta])* $konst:ident $field:ident : $kind:ident ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $kind, )*
        }
        $crate::kernel_args!(@names [$name] $( $konst $field $kind ),*);

        impl<'s, T: ?Sized> $crate::library::args::KernelArgs<'s, T> for $name {
            $crate::kernel_args!(@arg [$name] $( $field $kind ),*);
        }
    };
    (@names [$name:ident] $( $konst:ident $field:ident $kind:ident ),*) => {
        impl $name {
            $( pub const $konst: &'static str = stringify!($field); )*
            /// Every parameter name of the family's kernels.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($field)),*];
        }
    };
    (@arg [$name:ident] $( $field:ident $kind:ident ),*) => {
        fn type_name(&self) -> String {
            stringify!($name).to_string()
        }

        fn arg(&self, name: &str) -> Result<$crate::library::args::Bound<&'s T>, $crate::library::args::Unbound> {
            match name {
                $( stringify!($field) => $crate::kernel_args!(@bind $kind, self.$field), )*
                _ => Err($crate::library::args::Unbound::NotAParameter),
            }
        }
    };
    (@type buffer) => { B };
    (@type optional) => { Option<B> };
    (@type $value:ident) => { $value };
    (@bind buffer, $v:expr) => { Ok($crate::library::args::Bound::Buffer($v)) };
    (@bind optional, $v:expr) => { $v.map($crate::library::args::Bound::Buffer).ok_or($crate::library::args::Unbound::NotGiven) };
    (@bind $value:ident, $v:expr) => { Ok($crate::library::args::Bound::Value($crate::library::args::ValueArg::literal($v))) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use enigma_ir::builder::KernelBuilder;
    use enigma_ir::{Access, Type};

    crate::kernel_args! {
        /// Arguments of the test kernel.
        pub struct TestArgs {
            X x: buffer,
            BIAS bias: optional,
            N n: u32,
        }
    }

    crate::kernel_args! {
        pub struct OutArgs {
            Y y: buffer,
        }
    }

    fn kernel(with_bias: bool, extra: Option<&str>) -> Kernel {
        let mut k = KernelBuilder::new("test");
        k.buffer(TestArgs::X, Type::F32, Access::Read);
        if with_bias {
            k.buffer(TestArgs::BIAS, Type::F32, Access::Read);
        }
        k.buffer(OutArgs::Y, Type::F32, Access::ReadWrite);
        if let Some(name) = extra {
            k.value(name, Type::U32);
        }
        k.value(TestArgs::N, Type::U32);
        k.finish().unwrap()
    }

    #[test]
    fn binds_in_the_kernels_order_through_a_pair() {
        let args = (TestArgs { x: "x", bias: Some("bias"), n: 7 }, OutArgs { y: "y" });
        let bound = args.bind(&kernel(true, None)).unwrap();
        assert_eq!(bound, [Bound::Buffer("x"), Bound::Buffer("bias"), Bound::Buffer("y"), Bound::Value(Literal::u32(7))]);
        // A kernel without the optional buffer does not ask for it.
        let bound = (TestArgs { x: "x", bias: None, n: 7 }, OutArgs { y: "y" }).bind(&kernel(false, None)).unwrap();
        assert_eq!(bound, [Bound::Buffer("x"), Bound::Buffer("y"), Bound::Value(Literal::u32(7))]);
        assert_eq!((TestArgs::NAMES, OutArgs::NAMES), (&["x", "bias", "n"][..], &["y"][..]));
    }

    #[test]
    fn a_parameter_without_an_argument_is_an_error_naming_it() {
        let e = (TestArgs { x: "x", bias: None, n: 7 }, OutArgs { y: "y" }).bind(&kernel(true, None)).unwrap_err();
        assert_eq!((e.param.as_str(), e.reason), ("bias", Unbound::NotGiven));
        assert_eq!(e.to_string(), "kernel `test`: parameter `bias` is an optional buffer of TestArgs and OutArgs that the launch left out");
        let e = (TestArgs { x: "x", bias: None, n: 7 }, OutArgs { y: "y" }).bind(&kernel(false, Some("m"))).unwrap_err();
        assert_eq!((e.param.as_str(), e.reason), ("m", Unbound::NotAParameter));
        assert_eq!(e.to_string(), "kernel `test`: parameter `m` is not one of the arguments TestArgs and OutArgs binds");
    }
}
