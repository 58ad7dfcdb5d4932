// SPDX-License-Identifier: MIT
// Token contracts for Lynn/EVMQuest-v0, all built on OpenZeppelin 5.
pragma solidity 0.8.28;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/ERC20Permit.sol";
import {ERC20Burnable} from "@openzeppelin/contracts/token/ERC20/extensions/ERC20Burnable.sol";
import {ERC1363} from "@openzeppelin/contracts/token/ERC20/extensions/ERC1363.sol";
import {ERC20FlashMint} from "@openzeppelin/contracts/token/ERC20/extensions/ERC20FlashMint.sol";
import {ERC721} from "@openzeppelin/contracts/token/ERC721/ERC721.sol";
import {ERC1155} from "@openzeppelin/contracts/token/ERC1155/ERC1155.sol";
import {IERC1363Receiver} from "@openzeppelin/contracts/interfaces/IERC1363Receiver.sol";
import {IERC1363Spender} from "@openzeppelin/contracts/interfaces/IERC1363Spender.sol";
import {IERC3156FlashBorrower} from "@openzeppelin/contracts/interfaces/IERC3156FlashBorrower.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice ERC-20 with EIP-2612 permit, burn and the pre-OpenZeppelin-5 allowance helpers
/// (increaseAllowance / decreaseAllowance, which EVM-QuestBench's tasks call); the whole supply
/// goes to `holder`.
contract LynnToken is ERC20, ERC20Permit, ERC20Burnable {
    constructor(string memory name_, string memory symbol_, uint256 supply, address holder)
        ERC20(name_, symbol_)
        ERC20Permit(name_)
    {
        _mint(holder, supply);
    }

    function increaseAllowance(address spender, uint256 addedValue) public returns (bool) {
        _approve(msg.sender, spender, allowance(msg.sender, spender) + addedValue);
        return true;
    }

    function decreaseAllowance(address spender, uint256 subtractedValue) public returns (bool) {
        uint256 current = allowance(msg.sender, spender);
        require(current >= subtractedValue, "ERC20: decreased allowance below zero");
        _approve(msg.sender, spender, current - subtractedValue);
        return true;
    }
}

/// @notice ERC-1363 payable token (transferAndCall / approveAndCall).
contract LynnToken1363 is ERC1363 {
    constructor(string memory name_, string memory symbol_, uint256 supply, address holder) ERC20(name_, symbol_) {
        _mint(holder, supply);
    }
}

/// @notice Records every ERC-1363 transfer and approval callback it receives.
contract Token1363Receiver is IERC1363Receiver, IERC1363Spender {
    event TokensReceived(address indexed operator, address indexed from, uint256 value, bytes data);
    event ApprovalReceived(address indexed owner, uint256 value, bytes data);

    mapping(address => uint256) public received;
    mapping(address => uint256) public approvedBy;
    bytes public lastData;
    uint256 public callbacks;

    function onTransferReceived(address operator, address from, uint256 value, bytes calldata data)
        external
        returns (bytes4)
    {
        received[from] += value;
        lastData = data;
        callbacks += 1;
        emit TokensReceived(operator, from, value, data);
        return IERC1363Receiver.onTransferReceived.selector;
    }

    function onApprovalReceived(address owner, uint256 value, bytes calldata data) external returns (bytes4) {
        approvedBy[owner] = value;
        lastData = data;
        callbacks += 1;
        emit ApprovalReceived(owner, value, data);
        return IERC1363Spender.onApprovalReceived.selector;
    }
}

/// @notice ERC-20 lender of ERC-3156 flash loans (mint/burn, zero fee).
contract LynnFlashToken is ERC20, ERC20FlashMint {
    constructor(string memory name_, string memory symbol_, uint256 supply, address holder) ERC20(name_, symbol_) {
        _mint(holder, supply);
    }
}

/// @notice ERC-3156 borrower: accepts any loan from a lender, records it, and approves the repayment.
contract FlashBorrower is IERC3156FlashBorrower {
    event Borrowed(address indexed initiator, address indexed token, uint256 amount, uint256 fee, bytes data);

    uint256 public loans;
    uint256 public lastAmount;
    address public lastInitiator;

    function onFlashLoan(address initiator, address token, uint256 amount, uint256 fee, bytes calldata data)
        external
        returns (bytes32)
    {
        require(IERC20(token).balanceOf(address(this)) >= amount, "FlashBorrower: loan not received");
        loans += 1;
        lastAmount = amount;
        lastInitiator = initiator;
        IERC20(token).approve(msg.sender, amount + fee);
        emit Borrowed(initiator, token, amount, fee, data);
        return keccak256("ERC3156FlashBorrower.onFlashLoan");
    }
}

/// @notice ERC-721 collection; the owner mints, every token has a URI under `baseURI`.
contract LynnNFT is ERC721 {
    address public immutable minter;
    string private baseURI_;
    uint256 public totalMinted;

    constructor(string memory name_, string memory symbol_, string memory base) ERC721(name_, symbol_) {
        minter = msg.sender;
        baseURI_ = base;
    }

    function mint(address to, uint256 tokenId) external {
        require(msg.sender == minter, "LynnNFT: only minter");
        totalMinted += 1;
        _safeMint(to, tokenId);
    }

    function _baseURI() internal view override returns (string memory) {
        return baseURI_;
    }
}

/// @notice ERC-1155 multi-token; the owner mints.
contract LynnMultiToken is ERC1155 {
    address public immutable minter;

    constructor(string memory uri_) ERC1155(uri_) {
        minter = msg.sender;
    }

    function mint(address to, uint256 id, uint256 amount) external {
        require(msg.sender == minter, "LynnMultiToken: only minter");
        _mint(to, id, amount, "");
    }
}
