//! The shape of a `tacho.snapshot.v1` document read back by `diff`: every field a snapshot
//! writes must have the type tacho writes, so a hand-edited or hostile file is refused by
//! name instead of being compared as something it is not. Fields tacho does not know (a newer
//! version's) and missing ones (an older version's) are allowed, as `diff` promises.

use crate::text::json_kind;
use serde_json::Value;

/// What a field must hold.
#[derive(Clone, Copy)]
enum Shape {
    Text,
    Number,
    /// An object whose values are all `Self`'s inner kind.
    MapOf(&'static Shape),
    Object,
    /// An array of objects, each naming itself by the given string field.
    ListBy(&'static str),
    TextList,
}

const TEXT: Shape = Shape::Text;
const NUMBER: Shape = Shape::Number;

const TOP: [(&str, Shape); 13] = [
    ("schema", Shape::Text),
    ("tool_version", Shape::Text),
    ("taken_at_unix_s", Shape::Number),
    ("host", Shape::Object),
    ("kernel", Shape::Object),
    ("sysctl", Shape::MapOf(&TEXT)),
    ("thp", Shape::MapOf(&TEXT)),
    ("cpu", Shape::Object),
    ("vulnerabilities", Shape::MapOf(&TEXT)),
    ("iommu_groups", Shape::MapOf(&NUMBER)),
    ("devices", Shape::ListBy("name")),
    ("mounts", Shape::ListBy("mount_point")),
    ("swaps", Shape::ListBy("path")),
];

const KERNEL: [(&str, Shape); 5] = [
    ("release", Shape::Text),
    ("version", Shape::Text),
    ("cmdline", Shape::Text),
    ("config_source", Shape::Text),
    ("config", Shape::MapOf(&TEXT)),
];

/// Why a snapshot document is not one tacho wrote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    /// The document is not an object.
    #[error("the snapshot must be a JSON object")]
    NotAnObject,
    /// A field holds another type than tacho writes there.
    #[error("\"{name}\" is {found}; it must be {expected}")]
    WrongType {
        /// The field's path, `kernel.config.X` or `devices[0]`.
        name: String,
        /// What it holds (`a string`).
        found: &'static str,
        /// What tacho writes there (`an object`).
        expected: &'static str,
    },
}

/// `Err` names the first field whose type is wrong.
pub fn check(doc: &Value) -> Result<(), ShapeError> {
    let obj = doc.as_object().ok_or(ShapeError::NotAnObject)?;
    fields(obj, &TOP, "")?;
    if let Some(Value::Object(kernel)) = obj.get("kernel") {
        fields(kernel, &KERNEL, "kernel.")?;
    }
    match obj.get("unreadable") {
        None | Some(Value::Null) => Ok(()),
        Some(v) => is(v, Shape::TextList, "unreadable"),
    }
}

fn fields(
    obj: &serde_json::Map<String, Value>,
    expected: &[(&str, Shape)],
    prefix: &str,
) -> Result<(), ShapeError> {
    for (key, shape) in expected {
        match obj.get(*key) {
            // Optional fields are written as null when unknown.
            None | Some(Value::Null) => {}
            Some(v) => is(v, *shape, &format!("{prefix}{key}"))?,
        }
    }
    Ok(())
}

fn is(v: &Value, shape: Shape, name: &str) -> Result<(), ShapeError> {
    let wrong = |expected: &'static str| {
        Err(ShapeError::WrongType {
            name: name.to_string(),
            found: json_kind(v),
            expected,
        })
    };
    match shape {
        Shape::Text if !v.is_string() => wrong("a string"),
        Shape::Number if !v.is_number() => wrong("a number"),
        Shape::Object if !v.is_object() => wrong("an object"),
        Shape::MapOf(inner) => {
            let Some(map) = v.as_object() else {
                return wrong("an object");
            };
            for (k, item) in map {
                is(item, *inner, &format!("{name}.{k}"))?;
            }
            Ok(())
        }
        Shape::ListBy(id) => {
            let Some(items) = v.as_array() else {
                return wrong("an array");
            };
            for (i, item) in items.iter().enumerate() {
                let here = format!("{name}[{i}]");
                if !item.is_object() {
                    return Err(ShapeError::WrongType {
                        name: here,
                        found: json_kind(item),
                        expected: "an object",
                    });
                }
                is(&item[id], Shape::Text, &format!("{here}.{id}"))?;
            }
            Ok(())
        }
        Shape::TextList => match v.as_array() {
            Some(items) => items
                .iter()
                .enumerate()
                .try_for_each(|(i, item)| is(item, Shape::Text, &format!("{name}[{i}]"))),
            None => wrong("an array of strings"),
        },
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wrong_types_are_named() {
        let ok = json!({"schema": "tacho.snapshot.v1", "sysctl": {"vm.swappiness": "60"},
                        "devices": [{"name": "vda"}], "kernel": {"release": "6.1", "config": {}},
                        "future": [1, {"x": 2}]});
        assert_eq!(check(&ok), Ok(()));
        let bad = |doc: Value| check(&doc).unwrap_err().to_string();
        assert!(bad(json!({"sysctl": 5})).contains("\"sysctl\" is a number"));
        assert!(bad(json!({"sysctl": {"vm.x": {"y": 1}}})).contains("\"sysctl.vm.x\""));
        assert!(bad(json!({"devices": [{"name": 3}]})).contains("devices[0].name"));
        assert!(bad(json!({"devices": {}})).contains("an array"));
        assert!(bad(json!({"kernel": {"config": []}})).contains("kernel.config"));
        assert!(bad(json!({"iommu_groups": {"DMA": "x"}})).contains("a number"));
        assert!(bad(json!({"unreadable": [1]})).contains("unreadable[0]"));
        assert!(bad(json!([])).contains("object"));
    }
}
