// SPDX-License-Identifier: MIT
// Small contracts the agent calls directly in Lynn/EVMQuest-v0.
pragma solidity 0.8.28;

contract Counter {
    uint256 public count;
    mapping(address => uint256) public incrementsBy;

    event Incremented(address indexed caller, uint256 by, uint256 newCount);

    function increment() external {
        count += 1;
        incrementsBy[msg.sender] += 1;
        emit Incremented(msg.sender, 1, count);
    }

    function incrementBy(uint256 by) external {
        count += by;
        incrementsBy[msg.sender] += by;
        emit Incremented(msg.sender, by, count);
    }
}

contract MessageBoard {
    mapping(address => string) public messageOf;
    string public lastMessage;
    address public lastAuthor;
    uint256 public messageCount;

    event MessagePosted(address indexed author, string message);

    function postMessage(string calldata message) public {
        messageOf[msg.sender] = message;
        lastMessage = message;
        lastAuthor = msg.sender;
        messageCount += 1;
        emit MessagePosted(msg.sender, message);
    }

    /// @notice The same as postMessage, under the name EVM-QuestBench's message contract uses.
    function setMessage(string calldata message) external {
        postMessage(message);
    }
}

contract DonationBox {
    mapping(address => uint256) public donations;
    uint256 public totalDonations;

    event Donated(address indexed donor, uint256 amount);

    function donate() external payable {
        require(msg.value > 0, "DonationBox: nothing sent");
        donations[msg.sender] += msg.value;
        totalDonations += msg.value;
        emit Donated(msg.sender, msg.value);
    }
}

/// @notice Accepts native coin through receive() and fallback(); records who sent what.
contract FallbackReceiver {
    mapping(address => uint256) public receivedFrom;
    uint256 public receiveCalls;
    uint256 public fallbackCalls;
    bytes public lastData;

    event Received(address indexed sender, uint256 amount, bytes data, bool viaFallback);

    receive() external payable {
        receivedFrom[msg.sender] += msg.value;
        receiveCalls += 1;
        emit Received(msg.sender, msg.value, "", false);
    }

    fallback() external payable {
        receivedFrom[msg.sender] += msg.value;
        fallbackCalls += 1;
        lastData = msg.data;
        emit Received(msg.sender, msg.value, msg.data, true);
    }
}

/// @notice Logic contract run through delegatecall; its storage layout matches DelegateCaller's.
contract DelegateTarget {
    uint256 public value;
    address public lastSender;

    function setValue(uint256 newValue) external {
        value = newValue;
        lastSender = msg.sender;
    }
}

/// @notice Runs DelegateTarget code against its own storage.
contract DelegateCaller {
    uint256 public value;
    address public lastSender;

    event Delegated(address indexed target, bytes data, bool ok);

    function delegateSetValue(address target, uint256 newValue) external {
        (bool ok, ) = target.delegatecall(abi.encodeWithSignature("setValue(uint256)", newValue));
        require(ok, "DelegateCaller: delegatecall failed");
        emit Delegated(target, abi.encodeWithSignature("setValue(uint256)", newValue), ok);
    }

    function execute(address target, bytes calldata data) external returns (bytes memory) {
        (bool ok, bytes memory out) = target.delegatecall(data);
        require(ok, "DelegateCaller: delegatecall failed");
        emit Delegated(target, data, ok);
        return out;
    }
}
