//! One type for an object of a stored document, in two forms: as the command writes it (each
//! field its value, [`Written`]) and as the store reads it back (each field absent, null or
//! recorded: `store::stored::Read`, whose fields are `store::stored::Field`s, because a document
//! of an older version or made by hand may lack any field or hold another type). The field
//! names are declared once, so a renamed field is renamed in the reader too, and reading the
//! documents an older tacho wrote (the goldens of `tests/it/schema_golden.rs`) fails on it
//! instead of reading "absent".
//!
//! A struct takes the form as a type parameter defaulting to [`Written`] and declares each
//! field as `F::Of<T>`: `KernelResult` is what `bench cpu` writes, `KernelResult<Read>` what
//! the store reads.

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

/// What a field of either form can hold.
pub trait Leaf: Debug + Default + Serialize + DeserializeOwned {}

impl<T: Debug + Default + Serialize + DeserializeOwned> Leaf for T {}

/// How a document's struct holds its fields.
pub trait Form: Debug + Default {
    /// A field that holds a `T`.
    type Of<T: Leaf>: Leaf;

    /// Whether a list field holds nothing (for a field written only when it holds something).
    fn is_empty<T: Leaf>(list: &Self::Of<Vec<T>>) -> bool;
}

/// As written: each field is its value.
// Clone, Copy and PartialEq so a derive on a struct of this form can have them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Written;

impl Form for Written {
    type Of<T: Leaf> = T;

    fn is_empty<T: Leaf>(list: &Vec<T>) -> bool {
        list.is_empty()
    }
}
